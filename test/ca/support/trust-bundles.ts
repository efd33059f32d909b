/**
 * Shared setup of the CA's trust-bundle end-to-end tests: the CA's RBAC exactly as shipped, and
 * reading a ClusterTrustBundle as the admin (absent is `undefined`, any other failure throws).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CertificatesV1beta1Api, type V1beta1ClusterTrustBundle } from '@kubernetes/client-node';
import { parseManifest } from '../../../src/devcluster/index.js';
import { REPO_ROOT } from '../../deploy/manifests.js';
import type { CaEnv } from './ca-env.js';

/** Applies deploy/rbac-ca.yaml (it replaces the env's narrower ClusterRole of the same name). */
export async function applyShippedCaRbac(env: CaEnv): Promise<void> {
  await env.cluster.apply(parseManifest(readFileSync(join(REPO_ROOT, 'deploy/rbac-ca.yaml'), 'utf8')) as object[]);
}

/** The ClusterTrustBundle `name`, or `undefined` when there is none. */
export async function readBundle(env: CaEnv, name: string): Promise<V1beta1ClusterTrustBundle | undefined> {
  try {
    return await env.admin.makeApiClient(CertificatesV1beta1Api).readClusterTrustBundle({ name });
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}
