/**
 * `certbroker start` (`npm start`) — the whole local stack: devcluster, CA, a node broker for
 * node-1, sample workloads registered through the CNI socket, a Broker API consumer, and a live
 * view of identities, serials, expiry, next refresh and pods. Ctrl-C stops everything.
 */
import { Command } from 'commander';

export function command(): Command {
  return new Command('start')
    .description('run the whole system locally (devcluster + CA + node broker with its three fronts + sample pods + a sample client per front) with a live view')
    .option('--cert-ttl-seconds <n>', 'workload certificate lifetime (short, so rotation shows within minutes)', '300')
    .option('--duration-seconds <n>', 'stop by itself after this many seconds (0 = until Ctrl-C)', '0')
    .option('--interval-ms <n>', 'live view refresh period', '1000')
    .option('--signer <kind>', "the CA's signer: self-signed, or kubernetes-csr (CSRs signed by certbroker k8s-signer)", 'self-signed')
    .action(async (opts: { certTtlSeconds: string; durationSeconds: string; intervalMs: string; signer: string }) => {
      if (opts.signer !== 'self-signed' && opts.signer !== 'kubernetes-csr') throw new Error(`--signer=${JSON.stringify(opts.signer)} must be self-signed or kubernetes-csr`);
      const num = (name: string, v: string, min: number) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < min) throw new Error(`--${name}=${JSON.stringify(v)} must be an integer >= ${min}`);
        return n;
      };
      const options = {
        certTtlSeconds: num('cert-ttl-seconds', opts.certTtlSeconds, 60),
        durationSeconds: num('duration-seconds', opts.durationSeconds, 0),
        intervalMs: num('interval-ms', opts.intervalMs, 100),
        signer: opts.signer,
      } as const;
      const { runLocalStack } = await import('./start-stack.js');
      await runLocalStack(options);
      process.exit(0);
    });
}
