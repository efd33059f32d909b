/**
 * Where the self-signed CA keeps its root: a Kubernetes Secret in istiod's `istio-ca-secret`
 * layout (`ca-cert.pem`, `ca-key.pem`), so replicas and restarts share one root. Creation races
 * between replicas are settled by the apiserver: the loser gets 409 and reads the winner's.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { Secret } from '../../core/secret.js';

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
  read(): Promise<StoredCa | undefined>;
  /** Creates the Secret; 'exists' when another writer created it first (409). */
  create(ca: StoredCa): Promise<'created' | 'exists'>;
}

function httpCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'number' ? code : undefined;
}

export function kubeCaSecretStore(options: { readonly kubeConfig: KubeConfig; readonly namespace: string; readonly name: string }): CaSecretStore {
  const api = options.kubeConfig.makeApiClient(CoreV1Api);
  const { namespace, name } = options;
  return {
    location: `secret ${namespace}/${name}`,
    async read() {
      try {
        const s = await api.readNamespacedSecret({ name, namespace });
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
    async create(ca) {
      try {
        await api.createNamespacedSecret({
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
        });
        return 'created';
      } catch (err) {
        if (httpCode(err) === 409) return 'exists';
        throw err;
      }
    },
  };
}
