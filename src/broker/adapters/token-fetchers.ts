/**
 * Where the broker's own CA token comes from (the fetchers `TokenSource` drives): TokenRequest
 * for its own service account bound to its own pod, or the kubelet-projected token file.
 */
import { readFile } from 'node:fs/promises';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { decodeJwt } from 'jose';
import { withDeadline } from '../../core/deadline.js';
import { Secret } from '../../core/secret.js';
import { abortableApi } from '../../kube/abortable-http.js';
import type { FetchedToken, TokenFetcher } from './token-source.js';

export interface OwnPod {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly serviceAccount: string;
}

/** How long one TokenRequest may take before it is abandoned (and retried with backoff). */
export const TOKEN_REQUEST_TIMEOUT_MS = 10_000;

/** TokenRequest for the broker's own service account, bound to its own pod; abandoned after `timeoutMs` or on `signal`. */
export function tokenRequestFetcher(
  kubeConfig: KubeConfig,
  options: { readonly pod: OwnPod; readonly audience: string; readonly expirationSeconds: number; readonly timeoutMs?: number },
): TokenFetcher {
  return async (signal): Promise<FetchedToken> => {
    const { pod } = options;
    const request = {
      name: pod.serviceAccount,
      namespace: pod.namespace,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          audiences: [options.audience],
          expirationSeconds: options.expirationSeconds,
          boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid },
        },
      },
    };
    const what = `TokenRequest for ${pod.namespace}/${pod.serviceAccount}`;
    const res = await withDeadline(options.timeoutMs ?? TOKEN_REQUEST_TIMEOUT_MS, { what, parent: signal }, (s) =>
      abortableApi(kubeConfig, CoreV1Api, s).createNamespacedServiceAccountToken(request),
    );
    const token = res.status?.token;
    if (!token) throw new Error('TokenRequest answered without a token');
    const exp = res.status?.expirationTimestamp;
    const expiresAt = exp ? new Date(exp).getTime() : jwtExpiry(token);
    if (!Number.isFinite(expiresAt)) throw new Error('TokenRequest answered without an expiration');
    return { token: new Secret(token), expiresAt, source: 'token-request' };
  };
}

/** The projected service-account token file; expiry from the JWT's `exp` claim. */
export function projectedTokenFileFetcher(path: string): TokenFetcher {
  return async (): Promise<FetchedToken> => {
    const token = (await readFile(path, 'utf8')).trim();
    if (token === '') throw new Error(`token file ${path} is empty`);
    const expiresAt = jwtExpiry(token);
    if (!Number.isFinite(expiresAt)) throw new Error(`token in ${path} has no exp claim`);
    return { token: new Secret(token), expiresAt, source: 'file' };
  };
}

/** The `exp` claim (ms) of a JWT without verifying it (the CA verifies; we only schedule). */
function jwtExpiry(jwt: string): number {
  try {
    const { exp } = decodeJwt(jwt);
    return typeof exp === 'number' ? exp * 1000 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}
