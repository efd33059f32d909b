/**
 * `certbroker ca` as a process: read the configuration (flags over env), load kubeconfigs
 * (`--kubeconfig`/KUBECONFIG, else in-cluster), start the CA, run until SIGTERM/SIGINT, drain.
 */
import { readFile } from 'node:fs/promises';
import { createLogger, parseLogLevel } from '../core/log.js';
import { loadKubeConfig } from '../kube/kubeconfig.js';
import { aborted, HARD_EXIT_MARGIN_MS, signalController } from '../ops/lifecycle.js';
import { kubeCredentialsAllowedForOidc } from './authn/oidc-discovery.js';
import { startCaServer } from './ca-server.js';
import { readCaConfig, SELF_SIGNED_SECRET_NAME, type CaCliFlags, type CaServerConfig, type ClusterConfig } from './config.js';

export async function runCa(flags: CaCliFlags): Promise<void> {
  const env = readCaConfig(flags);
  const logger = createLogger({ level: parseLogLevel(env.logLevel) });
  const oidcCaPem = env.oidc?.caFile ? await readFile(env.oidc.caFile, 'utf8') : undefined;
  const clusterFrom = (id: string, path: string | undefined): ClusterConfig => {
    // Same loader (and coded errors) as the broker: the file when given, else in-cluster.
    const kubeConfig = path ? loadKubeConfig({ kubeconfigPath: path }) : loadKubeConfig({ inCluster: true });
    const oidc = env.oidc && id === env.defaultClusterId ? env.oidc : undefined;
    // The CA's own Kubernetes token goes on OIDC fetches only when they start at the API
    // server; discovery then sends it to that origin alone (never to a jwks_uri elsewhere).
    const useKubeCredentials =
      oidc !== undefined &&
      kubeCredentialsAllowedForOidc({
        apiServerUrl: kubeConfig.getCurrentCluster()?.server,
        issuer: oidc.issuer,
        ...(oidc.discoveryUrl ? { discoveryUrl: oidc.discoveryUrl } : {}),
        ...(oidc.jwksUri ? { jwksUri: oidc.jwksUri } : {}),
      });
    if (oidc && !useKubeCredentials) {
      logger.info('OIDC discovery/JWKS fetched without the CA\'s Kubernetes credentials (not at the API server\'s origin)', { cluster: id, issuer: oidc.issuer });
    }
    return {
      id,
      kubeConfig,
      audiences: env.audiences,
      tokenReview: env.tokenReview,
      ...(oidc
        ? {
            oidc: {
              issuer: oidc.issuer,
              algorithms: oidc.algorithms,
              ...(oidc.discoveryUrl ? { discoveryUrl: oidc.discoveryUrl } : {}),
              ...(oidc.jwksUri ? { jwksUri: oidc.jwksUri } : {}),
              ...(oidcCaPem ? { caPem: oidcCaPem } : {}),
              useKubeCredentials,
            },
          }
        : {}),
    };
  };
  const clusters = [clusterFrom(env.defaultClusterId, env.kubeconfigPath), ...env.remoteClusters.map((r) => clusterFrom(r.id, r.kubeconfigPath))];
  // SIGTERM ends the process within the drain grace (+3 s), also while the CA is still starting.
  const controller = signalController(logger, { hardExitAfterMs: env.shutdownGraceMs + HARD_EXIT_MARGIN_MS });
  const signer: CaServerConfig['signer'] =
    env.signerKind === 'step-ca' && env.stepCa
      ? { kind: 'step-ca', ...env.stepCa }
      : env.signerKind === 'cacerts'
        ? { kind: 'cacerts', dir: env.cacertsDir }
        : env.signerKind === 'kubernetes-csr' && env.k8sCsr
          ? { kind: 'kubernetes-csr', signerName: env.k8sCsr.signerName, autoApprove: env.k8sCsr.autoApprove, rootsPem: await readFile(env.k8sCsr.rootsFile, 'utf8'), timeoutMs: env.k8sCsr.timeoutMs }
        : { kind: 'self-signed', namespace: env.caNamespace, secretName: SELF_SIGNED_SECRET_NAME, keyType: env.selfSignedKey, rootTtlSeconds: env.selfSignedRootTtlSeconds };
  let ca;
  try {
    ca = await startCaServer({ ...env, clusters, signer, logger }, { signal: controller.signal });
  } catch (err) {
    if (!controller.signal.aborted) throw err;
    logger.info('CA stopped before it finished starting');
    return;
  }
  await aborted(controller.signal);
  await ca.stop();
}
