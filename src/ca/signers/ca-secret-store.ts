/**
 * Where the self-signed CA keeps its root: a Kubernetes Secret in istiod's `istio-ca-secret`
 * layout (`ca-cert.pem`, `ca-key.pem`), so replicas and restarts share one root. Creation races
 * between replicas are settled by the apiserver: the loser gets 409 and reads the winner's.
 * Each request is abandoned (its connection closed) after `requestTimeoutMs` or when the
 * caller's signal aborts, so a hung API server never holds the CA's start or its shutdown.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { withDeadline } from '../../core/deadline.js';
import { Secret } from '../../core/secret.js';
import { abortableApi } from '../../kube/abortable-http.js';

export const CA_CERT_KEY = 'ca-cert.pem';
export const CA_KEY_KEY = 'ca-key.pem';
/** Every root the CA trusts (several during a root rotation); absent or empty: ca-cert.pem alone. */
export const ROOT_CERT_KEY = 'root-cert.pem';
/** A root made by `certbroker ca rotate-root prepare`, trusted but not signing yet (certbroker's own keys). */
export const NEXT_CA_CERT_KEY = 'next-ca-cert.pem';
export const NEXT_CA_KEY_KEY = 'next-ca-key.pem';
export const CA_SECRET_TYPE = 'istio.io/ca-root';

export interface StoredCa {
  /** The signing root. */
  readonly certPem: string;
  readonly keyPem: Secret<string>;
  /** root-cert.pem: every trusted root (absent: `certPem` alone). */
  readonly rootsPem?: string;
  /** The root a rotation will switch to (prepared, not signing yet). */
  readonly next?: { readonly certPem: string; readonly keyPem: Secret<string> };
  /** The Secret's resourceVersion as read (a replace is refused when it moved). */
  readonly resourceVersion?: string;
}

export interface CaSecretStore {
  readonly location: string;
  /** The stored CA, or undefined when the Secret does not exist. */
  read(signal?: AbortSignal): Promise<StoredCa | undefined>;
  /** Creates the Secret; 'exists' when another writer created it first (409). */
  create(ca: StoredCa, signal?: AbortSignal): Promise<'created' | 'exists'>;
  /**
   * Replaces the Secret's CA keys with `ca` if it is still at `ca.resourceVersion` (the one
   * writer of a rotation step wins; 'conflict' when someone wrote in between: read again).
   */
  replace?(ca: StoredCa, signal?: AbortSignal): Promise<'replaced' | 'conflict'>;
}

const b64 = (text: string): string => Buffer.from(text).toString('base64');
const text = (data: Record<string, string> | undefined, key: string): string | undefined => {
  const v = data?.[key];
  return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
};

/** The Secret's data for `ca` (the rotation keys only when present). */
function secretData(ca: StoredCa): Record<string, string> {
  return {
    [CA_CERT_KEY]: b64(ca.certPem),
    [CA_KEY_KEY]: b64(ca.keyPem.reveal()),
    ...(ca.rootsPem !== undefined ? { [ROOT_CERT_KEY]: b64(ca.rootsPem) } : {}),
    ...(ca.next ? { [NEXT_CA_CERT_KEY]: b64(ca.next.certPem), [NEXT_CA_KEY_KEY]: b64(ca.next.keyPem.reveal()) } : {}),
  };
}

/** Default bound of one Secret read or create. */
export const CA_SECRET_REQUEST_TIMEOUT_MS = 10_000;

function httpCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'number' ? code : undefined;
}

export function kubeCaSecretStore(options: {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly name: string;
  readonly requestTimeoutMs?: number;
}): CaSecretStore {
  const { namespace, name, kubeConfig } = options;
  const location = `secret ${namespace}/${name}`;
  const call = <T>(verb: string, signal: AbortSignal | undefined, fn: (api: CoreV1Api) => Promise<T>): Promise<T> =>
    withDeadline(options.requestTimeoutMs ?? CA_SECRET_REQUEST_TIMEOUT_MS, { what: `${verb} ${location}`, parent: signal }, (s) =>
      fn(abortableApi(kubeConfig, CoreV1Api, s)),
    );
  return {
    location,
    async read(signal) {
      try {
        const s = await call('read', signal, (api) => api.readNamespacedSecret({ name, namespace }));
        const cert = text(s.data, CA_CERT_KEY);
        const key = text(s.data, CA_KEY_KEY);
        if (cert === undefined || key === undefined) {
          throw new Error(`secret ${namespace}/${name} lacks ${CA_CERT_KEY} or ${CA_KEY_KEY}`);
        }
        const roots = text(s.data, ROOT_CERT_KEY);
        const nextCert = text(s.data, NEXT_CA_CERT_KEY);
        const nextKey = text(s.data, NEXT_CA_KEY_KEY);
        return {
          certPem: cert,
          keyPem: new Secret(key),
          ...(roots !== undefined && roots.trim() !== '' ? { rootsPem: roots } : {}),
          ...(nextCert !== undefined && nextKey !== undefined ? { next: { certPem: nextCert, keyPem: new Secret(nextKey) } } : {}),
          ...(s.metadata?.resourceVersion ? { resourceVersion: s.metadata.resourceVersion } : {}),
        };
      } catch (err) {
        if (httpCode(err) === 404) return undefined;
        throw err;
      }
    },
    async create(ca, signal) {
      try {
        await call('create', signal, (api) => api.createNamespacedSecret({
          namespace,
          body: {
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: { name, namespace },
            type: CA_SECRET_TYPE,
            data: secretData(ca),
          },
        }));
        return 'created';
      } catch (err) {
        if (httpCode(err) === 409) return 'exists';
        throw err;
      }
    },
    async replace(ca, signal) {
      if (ca.resourceVersion === undefined) throw new Error(`replace ${location}: the CA was not read from the Secret (no resourceVersion)`);
      try {
        // Optimistic concurrency: the apiserver refuses (409) a resourceVersion that moved.
        await call('replace', signal, (api) => api.replaceNamespacedSecret({
          name,
          namespace,
          body: { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace, resourceVersion: ca.resourceVersion }, type: CA_SECRET_TYPE, data: secretData(ca) },
        }));
        return 'replaced';
      } catch (err) {
        if (httpCode(err) === 409) return 'conflict';
        throw err;
      }
    },
  };
}
