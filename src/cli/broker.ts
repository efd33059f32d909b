/**
 * `certbroker broker` — the node broker (one per node): own token via TokenRequest, the node's
 * pods, one certificate per workload service account, the SPIFFE Broker API on a Unix socket
 * (and, with --workload-api-socket, the SPIFFE Workload API for every workload on the node).
 * Configured by env (downward API: NODE_NAME, POD_NAME, POD_NAMESPACE, POD_UID,
 * SERVICE_ACCOUNT); flags override the most common settings for local runs.
 */
import { Command } from 'commander';

export function command(): Command {
  return new Command('broker')
    .description('run the node broker: workload certificates for this node over the SPIFFE Broker API')
    .option('--node-name <name>', 'this node (NODE_NAME)')
    .option('--trust-domain <td>', 'SPIFFE trust domain (TRUST_DOMAIN, default cluster.local)')
    .option('--ca-address <target>', 'CA replicas: host:port (a DNS name: every address it resolves to, e.g. a headless Service), or ip:port,ip:port,... (CA_ADDRESS, default istiod.istio-system.svc:15012)')
    .option('--ca-root-cert-file <path>', 'mesh root PEM (CA_ROOT_CERT_FILE)')
    .option('--broker-socket <unix:///path>', 'Broker API socket (SPIFFE_BROKER_SOCKET)')
    .option('--cni-event-socket <path>', 'CNI registration socket (CNI_EVENT_SOCKET)')
    .option('--workload-api-socket <unix:///path>', 'serve the SPIFFE Workload API on this socket, any local process may connect (WORKLOAD_API_SOCKET; default off)')
    .option('--workload-api-max-connections <n>', 'Workload API connections open at once (WORKLOAD_API_MAX_CONNECTIONS, default 1024)')
    .option('--workload-api-max-connections-per-caller <n>', 'Workload API connections of one pod, or of one process outside pods (WORKLOAD_API_MAX_CONNECTIONS_PER_CALLER, default 32)')
    .option('--workload-api-max-streams <n>', 'Workload API streams open at once (WORKLOAD_API_MAX_STREAMS, default 2048)')
    .option('--workload-api-max-streams-per-caller <n>', 'Workload API streams of one caller (WORKLOAD_API_MAX_STREAMS_PER_CALLER, default 64)')
    .option('--ops-address <host:port|off>', '/healthz, /readyz, /metrics (BROKER_OPS_ADDRESS, default 0.0.0.0:15022)')
    .option('--kubeconfig <path>', 'kubeconfig (KUBECONFIG; default in-cluster)')
    .option('--allowed-callers <ids>', 'comma-separated SPIFFE IDs allowed on the Broker API (BROKER_ALLOWED_CALLERS)')
    .option('--cert-ttl-seconds <n>', 'requested workload certificate lifetime (WORKLOAD_CERT_TTL_SECONDS)')
    .option('--istio-ca-front-address <host:port|off>', 'node-local Istio CA for released ztunnel, TLS gRPC (ISTIO_CA_FRONT_ADDRESS, default 127.0.0.1:15012; off or empty disables)')
    .option('--istio-ca-front-alt-hostname <name>', 'extra DNS name on the front\'s certificate, e.g. a node-local Service (ISTIO_CA_FRONT_ALT_HOSTNAME)')
    .action(async (opts: Record<string, string | undefined>) => {
      const { runBroker } = await import('../broker/run.js');
      const flags: Record<string, string> = {};
      for (const [k, v] of Object.entries(opts)) if (v !== undefined) flags[k] = v;
      await runBroker(flags);
    });
}
