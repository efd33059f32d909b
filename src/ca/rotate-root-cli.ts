/**
 * `certbroker ca rotate-root <step>` as a process: flags over env (the CA's own names, so the
 * same environment as the CA's), every problem listed at once, the Secret from the kubeconfig
 * (`--kubeconfig`/KUBECONFIG, else in-cluster), one step (rotate-root.ts), the result on stdout
 * as JSON (no key).
 */
import { ConfigReader } from '../core/config.js';
import { loadKubeConfig } from '../kube/kubeconfig.js';
import { ENV, SELF_SIGNED_SECRET_NAME } from './config.js';
import { rotateStoredRoot } from './rotate-root.js';
import { kubeCaSecretStore } from './signers/ca-secret-store.js';
import { ROTATION_STEPS } from './signers/root-rotation.js';

export interface RotateRootFlags {
  readonly kubeconfig?: string;
  readonly namespace?: string;
  readonly secret?: string;
  readonly trustDomain?: string;
  readonly keyType?: string;
  readonly rootTtlSeconds?: string;
}

export async function runRotateRoot(stepArg: string, flags: RotateRootFlags, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const r = new ConfigReader(env);
  const step = r.oneOf('step', [...ROTATION_STEPS, 'status'] as const, 'status', stepArg);
  const namespace = r.string(ENV.CA_NAMESPACE, 'istio-system', flags.namespace);
  const trustDomain = r.string(ENV.TRUST_DOMAIN, 'cluster.local', flags.trustDomain);
  const keyType = r.oneOf(ENV.SELF_SIGNED_KEY, ['ec', 'rsa'] as const, 'ec', flags.keyType);
  const rootTtlSeconds = r.int(ENV.SELF_SIGNED_TTL_SECONDS, 10 * 365 * 24 * 3600, { min: 3600, ...(flags.rootTtlSeconds !== undefined ? { explicit: flags.rootTtlSeconds } : {}) });
  const kubeconfigPath = r.optionalString(ENV.KUBECONFIG, flags.kubeconfig);
  r.done();
  const kubeConfig = kubeconfigPath ? loadKubeConfig({ kubeconfigPath }) : loadKubeConfig({ inCluster: true });
  const store = kubeCaSecretStore({ kubeConfig, namespace, name: flags.secret ?? SELF_SIGNED_SECRET_NAME });
  const result = await rotateStoredRoot(store, step, { trustDomain, keyType, rootTtlSeconds, nowMs: Date.now() });
  process.stdout.write(`${JSON.stringify({ step, secret: store.location, ...result }, null, 2)}\n`);
}
