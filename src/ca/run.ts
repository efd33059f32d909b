/**
 * `certbroker ca` as a process: read the configuration (flags over env), load kubeconfigs
 * (`--kubeconfig`/KUBECONFIG, else in-cluster), start the CA, run until SIGTERM/SIGINT, drain.
 */
import { readFile } from 'node:fs/promises';
import { createLogger } from '../core/log.js';
import { loadKubeConfig } from '../kube/kubeconfig.js';
import { aborted, HARD_EXIT_MARGIN_MS, signalController } from '../ops/lifecycle.js';
import { kubeCredentialsAllowedForOidc } from './authn/oidc-discovery.js';
import { startCaServer } from './ca-server.js';
import { readCaConfig, SELF_SIGNED_SECRET_NAME, type CaCliFlags, type CaEnvConfig, type CaServerConfig, type ClusterConfig } from './config.js';
import { loadSignerModule } from './signers/module-loader.js';

export async function runCa(flags: CaCliFlags): Promise<void> {
  const env = readCaConfig(flags);
  const logger = createLogger({ level: env.logLevel });
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
  const signer = await signerConfig(env);
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

/** The signer `env` names; a `module:` signer's module is imported here, so a broken one stops the start. */
async function signerConfig(env: CaEnvConfig): Promise<CaServerConfig['signer']> {
  const external = env.externalSigner;
  if (external?.kind === 'module') return { kind: 'module', module: await loadSignerModule(external.specifier), specifier: external.specifier, timeoutMs: external.timeoutMs };
  if (external) return external;
  if (env.signerKind === 'step-ca' && env.stepCa) return { kind: 'step-ca', ...env.stepCa };
  if (env.signerKind === 'cacerts') return { kind: 'cacerts', dir: env.cacertsDir };
  if (env.signerKind === 'kubernetes-csr' && env.k8sCsr) {
    const { signerName, autoApprove, rootsFile, timeoutMs } = env.k8sCsr;
    return { kind: 'kubernetes-csr', signerName, autoApprove, rootsPem: await readFile(rootsFile, 'utf8'), rootsFile, timeoutMs };
  }
  return { kind: 'self-signed', namespace: env.caNamespace, secretName: SELF_SIGNED_SECRET_NAME, keyType: env.selfSignedKey, rootTtlSeconds: env.selfSignedRootTtlSeconds };
}
