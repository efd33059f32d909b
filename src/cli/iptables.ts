/**
 * `certbroker istio-iptables [flags]`: the same program as the standalone istio-iptables
 * executable. Commander only routes here; the flags (Istio's, short and long) are parsed by the
 * shared istio-iptables parser so both entry points behave identically.
 */
import { Command } from 'commander';

export function command(): Command {
  return new Command('istio-iptables')
    .description("set up Istio sidecar traffic capture (Istio's istio-iptables flags; --help for the list)")
    .helpOption(false)
    .allowUnknownOption(true)
    .allowExcessArguments(true)
    .argument('[flags...]')
    .action(async (flags: string[]) => {
      const { runIstioIptables } = await import('../cni/iptables/run.js');
      process.exitCode = await runIstioIptables(flags, process.env, {
        stdout: (t) => process.stdout.write(t),
        stderr: (t) => process.stderr.write(t),
      });
    });
}
