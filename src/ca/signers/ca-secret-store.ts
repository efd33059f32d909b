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
export const CA_SECRET_TYPE = 'istio.io/ca-root';

export interface StoredCa {
  readonly certPem: string;
  readonly keyPem: Secret<string>;
}

export interface CaSecretStore {
  readonly location: string;
  /** The stored CA, or undefined when the Secret does not exist. */
  read(signal?: AbortSignal): Promise<StoredCa | undefined>;
  /** Creates the Secret; 'exists' when another writer created it first (409). */
  create(ca: StoredCa, signal?: AbortSignal): Promise<'created' | 'exists'>;
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
        const cert = s.data?.[CA_CERT_KEY];
        const key = s.data?.[CA_KEY_KEY];
        if (cert === undefined || key === undefined) {
          throw new Error(`secret ${namespace}/${name} lacks ${CA_CERT_KEY} or ${CA_KEY_KEY}`);
        }
        return {
          certPem: Buffer.from(cert, 'base64').toString('utf8'),
          keyPem: new Secret(Buffer.from(key, 'base64').toString('utf8')),
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
            data: {
              [CA_CERT_KEY]: Buffer.from(ca.certPem).toString('base64'),
              [CA_KEY_KEY]: Buffer.from(ca.keyPem.reveal()).toString('base64'),
            },
          },
        }));
        return 'created';
      } catch (err) {
        if (httpCode(err) === 409) return 'exists';
        throw err;
      }
    },
  };
}
