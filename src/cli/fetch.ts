/**
 * `certbroker fetch` — a small Broker API consumer: gets its own SVID from the CA with its
 * token, subscribes for a pod, prints identity, serial and validity, optionally writes PEMs.
 */
import { Command } from 'commander';

export function command(): Command {
  return new Command('fetch')
    .description('subscribe to a pod\'s X509-SVID over the Broker API and print (or write) it')
    .option('--uid <uid>', 'pod UID')
    .option('--namespace <ns>', 'pod namespace')
    .option('--name <name>', 'pod name')
    .option('--socket <unix:///path>', 'Broker API socket (SPIFFE_BROKER_SOCKET)')
    .option('--token-file <path>', 'this consumer\'s service-account token (audience istio-ca)')
    .option('--ca-address <host:port>', 'CA address, to obtain this consumer\'s own SVID (CA_ADDRESS)')
    .option('--ca-root-cert-file <path>', 'mesh root PEM (CA_ROOT_CERT_FILE)')
    .option('--ca-tls-server-name <name>', 'DNS name to verify in the CA serving certificate (set it when --ca-address is an IP)')
    .option('--trust-domain <td>', 'SPIFFE trust domain (TRUST_DOMAIN)')
    .option('--cluster-id <id>', 'clusterid sent to the CA (CLUSTER_ID)')
    .option('--out-dir <dir>', 'write cert-chain.pem, key.pem (0600) and root-cert.pem here')
    .option('--watch', 'keep the subscription open and print every rotation')
    .action(async (opts: Record<string, string | boolean | undefined>) => {
      const { runFetch } = await import('../broker/client/fetch.js');
      const { HARD_EXIT_MARGIN_MS, signalController } = await import('../ops/lifecycle.js');
      const { createLogger } = await import('../core/log.js');
      // Nothing to drain: a fetch still running 3 s after SIGTERM exits anyway.
      const controller = signalController(createLogger({ level: 'warn' }), { hardExitAfterMs: HARD_EXIT_MARGIN_MS });
      const s = (k: string) => (typeof opts[k] === 'string' ? { [k]: opts[k] as string } : {});
      await runFetch({
        ...s('uid'), ...s('namespace'), ...s('name'), ...s('socket'), ...s('tokenFile'), ...s('caAddress'),
        ...s('caRootCertFile'), ...s('caTlsServerName'), ...s('trustDomain'), ...s('clusterId'), ...s('outDir'),
        watch: opts['watch'] === true,
        signal: controller.signal,
      });
    });
}
