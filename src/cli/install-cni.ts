/**
 * `certbroker install-cni` — the istio-cni DaemonSet container: installs the CNI plugin on the
 * node, keeps it installed, runs the repair controller, and cleans up on exit unless this is
 * an upgrade. Configured by env (see docs/operations.md); a few flags override for local runs.
 */
import { Command } from 'commander';

export function command(): Command {
  return new Command('install-cni')
    .description('install the istio-cni plugin on this node and keep it installed (DaemonSet container)')
    .option('--cni-net-dir <dir>', 'mounted host CNI config dir (MOUNTED_CNI_NET_DIR)')
    .option('--cni-bin-dir <dir>', 'mounted host CNI binary dir (MOUNTED_CNI_BIN_DIR)')
    .option('--binaries-source-dir <dir>', 'where the plugin binaries to copy live (CNI_BINARIES_SOURCE_DIR)')
    .option('--cni-conf-name <name>', 'primary CNI config file name instead of auto-detection (CNI_CONF_NAME)')
    .option('--monitoring-port <port>', 'port for /healthz, /readyz, /metrics (MONITORING_PORT)')
    .option('--uninstall-on-exit <policy>', 'unless-upgrade | always | never (UNINSTALL_ON_EXIT)')
    .option('--log-level <level>', 'debug | info | warn | error (LOG_LEVEL)')
    .action(async (opts: Record<string, string | undefined>) => {
      const { runInstallCni } = await import('../cni/install/run.js');
      await runInstallCni({
        mountedCniNetDir: opts.cniNetDir,
        mountedCniBinDir: opts.cniBinDir,
        binariesSourceDir: opts.binariesSourceDir,
        cniConfName: opts.cniConfName,
        monitoringPort: opts.monitoringPort,
        uninstallOnExit: opts.uninstallOnExit,
        logLevel: opts.logLevel,
      });
    });
}
