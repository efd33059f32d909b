/**
 * `certbroker devcluster` — runs the in-memory Kubernetes API server subset standalone and
 * writes an admin kubeconfig for kubectl and the other components.
 */
import { Command } from 'commander';
import { givenOptions } from './given-options.js';

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

export function command(): Command {
  return new Command('devcluster')
    .description('run a local Kubernetes API server subset (HTTPS, in memory) and write an admin kubeconfig')
    .option('--host <addr>', 'listen address (DEVCLUSTER_HOST, default 127.0.0.1)')
    .option('--port <n>', 'listen port, 0 = any free port (DEVCLUSTER_PORT, default 6443)')
    .option('--kubeconfig <path>', 'where to write the admin kubeconfig (DEVCLUSTER_KUBECONFIG, default .devcluster/kubeconfig)')
    .option('--simulate-kubelet <bool>', 'pods with spec.nodeName become Running with a pod IP (DEVCLUSTER_SIMULATE_KUBELET, default true)')
    .option('--issuer <url>', 'service-account token issuer and API audience (DEVCLUSTER_ISSUER)')
    .option('--samples', 'create a few sample objects (a node, istio-system/ztunnel, demo/httpbin)')
    .option('--apply <file>', 'create the objects of a YAML/JSON manifest at start (repeatable)', collect, [] as string[])
    .option('--pods-dir <dir>', 'where the simulated kubelet writes pod volumes: podCertificate credential bundles under <dir>/<pod uid>/volumes/ (DEVCLUSTER_PODS_DIR; default: not written)')
    .option('--log-level <level>', 'debug|info|warn|error|silent (LOG_LEVEL, default info)')
    .action(async (opts: { host?: string; port?: string; kubeconfig?: string; simulateKubelet?: string; issuer?: string; samples?: boolean; apply: string[]; logLevel?: string; podsDir?: string }) => {
      const { runDevCluster } = await import('../devcluster/run.js');
      await runDevCluster({
        ...givenOptions(opts, ['host', 'port', 'kubeconfig', 'simulateKubelet', 'issuer', 'logLevel', 'podsDir']),
        ...(opts.samples ? { samples: true } : {}),
        apply: opts.apply,
      });
    });
}
