/**
 * One istio-iptables run, shared by the standalone executable (main.ts) and
 * `certbroker istio-iptables`: flags -> config -> dry-run print | cleanup | apply, then the
 * optional validation. Returns the exit code: 0 ok, 1 failure, 2 bad flags or values,
 * 126 validation failed (as Istio). Never throws; never prints a stack trace.
 */
import { readFile } from 'node:fs/promises';
import { ConfigError } from '../../core/config.js';
import { createLogger, type Logger } from '../../core/log.js';
import { describeError, isCertbrokerError } from '../../core/errors.js';
import { IptablesApplier } from './applier.js';
import { problemsForCli, resolveCliOptions, uidFromPasswd, type CliOptions, type Env } from './cli-options.js';
import { resolveIptablesConfig } from './config.js';
import { detectIPv6 } from './detect.js';
import { IptablesError } from './errors.js';
import { assertNetns, systemRunner } from './exec.js';
import { parseArgs, usage } from './flags.js';
import { buildRestorePlan } from './plan.js';
import { parseResolvConf } from './resolv-conf.js';
import { runValidation } from './validation.js';

export const EXIT = { OK: 0, FAILED: 1, USAGE: 2, VALIDATION: 126 } as const;

export interface RunIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly log?: Logger;
  readonly signal?: AbortSignal;
}

export async function runIstioIptables(argv: readonly string[], env: Env, io: RunIo): Promise<number> {
  const log = io.log ?? createLogger({ fields: { component: 'istio-iptables' } });
  let opts: CliOptions;
  try {
    const args = parseArgs(argv);
    if (args.get('help') === 'true') {
      io.stdout(usage());
      return EXIT.OK;
    }
    opts = resolveCliOptions(args, env);
  } catch (err) {
    return usageError(io, err);
  }
  try {
    if (opts.networkNamespace !== undefined && !opts.dryRun) await assertNetns(opts.networkNamespace);
    const runner = systemRunner(opts.networkNamespace === undefined ? {} : { netnsPath: opts.networkNamespace });
    const settings = { ...opts.settings };
    if (settings.proxyUID === undefined) settings.proxyUID = await envoyUid(opts.envoyUser);
    let ipv6 = opts.ipv6;
    // Cleanup removes both families whatever the pod is, so it needs no detection.
    if (ipv6 === undefined && opts.cleanupOnly) ipv6 = false;
    if (ipv6 === undefined) {
      ipv6 = await detectIPv6(runner, opts.dualStack).catch(() => undefined);
      if (ipv6 === undefined) {
        log.warn('no usable pod address found to detect the IP family; assuming IPv4 (override with --ipv6)');
        ipv6 = false;
      }
    }
    if (settings.redirectDNS === true && settings.captureAllDNS !== true && !opts.cleanupOnly) {
      const text = await readFile(opts.resolvConfPath, 'utf8').catch((e: unknown) => {
        throw new IptablesError('ERR_IPTABLES_RESOLV_CONF', `cannot read ${opts.resolvConfPath}: ${describeError(e)}`, e);
      });
      const ns = parseResolvConf(text);
      settings.dnsServersV4 = ns.v4;
      settings.dnsServersV6 = ns.v6;
    }
    let config;
    try {
      config = resolveIptablesConfig({ ...settings, enableIPv6: ipv6 });
    } catch (err) {
      return usageError(io, err);
    }
    const plan = buildRestorePlan(config);

    if (opts.dryRun) {
      io.stdout(`# iptables-restore --noflush\n${plan.v4}`);
      if (config.enableIPv6) io.stdout(`# ip6tables-restore --noflush\n${plan.v6}`);
      return EXIT.OK;
    }
    const applier = new IptablesApplier({ runner, log, mode: opts.forceLegacy ? 'legacy' : 'auto' });
    if (opts.cleanupOnly) {
      await applier.cleanup(config);
      return EXIT.OK;
    }
    if (!opts.skipRuleApply) await applier.apply(plan, { reconcile: opts.reconcile });
    if (opts.runValidation) {
      try {
        const r = await runValidation({
          ipv6: config.enableIPv6,
          proxyPort: config.proxyPort,
          inboundCapturePort: config.inboundCapturePort,
          probePort: opts.probePort,
          timeoutMs: opts.probeTimeoutMs,
          ...(io.signal === undefined ? {} : { signal: io.signal }),
        });
        log.info('iptables validation passed', { landedOn: r.landedOn, attempts: r.attempts });
      } catch (err) {
        io.stderr(`istio-iptables: ${describeError(err)}\n`);
        return EXIT.VALIDATION;
      }
    }
    return EXIT.OK;
  } catch (err) {
    if (isCertbrokerError(err)) {
      io.stderr(`istio-iptables: ${describeError(err)}\n`);
    } else {
      io.stderr('istio-iptables: unexpected error (see log)\n');
      log.error('unexpected error', { error: err });
    }
    return EXIT.FAILED;
  }
}

function usageError(io: RunIo, err: unknown): number {
  if (err instanceof ConfigError) {
    io.stderr(`istio-iptables: invalid settings:\n  - ${problemsForCli(err.problems).join('\n  - ')}\n`);
  } else if (err instanceof IptablesError) {
    io.stderr(`istio-iptables: ${err.message}\nRun with --help for the flags.\n`);
  } else {
    io.stderr(`istio-iptables: ${describeError(err)}\n`);
  }
  return EXIT.USAGE;
}

/** The uid of $ENVOY_USER from /etc/passwd, else Istio's default 1337. */
async function envoyUid(user: string): Promise<string> {
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  return uidFromPasswd(passwd, user) ?? '1337';
}
