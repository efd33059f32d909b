/**
 * certificates.k8s.io/v1beta1 PodCertificateRequests (KEP-4317, Kubernetes 1.35) as a signer
 * sees them: the JSON shape (client-node 1.3 has no types for them), where a request stands
 * (Issued, Denied and Failed are final), the informer over one signer's requests (field
 * selector `spec.signerName`), and the `/status` write, a PUT guarded by the resourceVersion
 * that was read, through `kubeRequest` with a deadline.
 */
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { kubeRequest, readJson } from './api-request.js';
import type { Informer } from './informer.js';
import { createSignerNameInformer, type SignerNameInformerOptions } from './signer-name-informer.js';

const PCR_API_VERSION = 'certificates.k8s.io/v1beta1';
const PCR_COLLECTION_PATH = '/apis/certificates.k8s.io/v1beta1/podcertificaterequests';

export type PcrConditionType = 'Issued' | 'Denied' | 'Failed';

/** metav1.Condition. */
export interface PcrCondition {
  readonly type: string;
  readonly status: string;
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string;
  readonly observedGeneration?: number;
}

export interface PcrObject extends KubernetesObject {
  spec: {
    signerName: string;
    podName: string;
    podUID: string;
    serviceAccountName: string;
    serviceAccountUID: string;
    nodeName: string;
    nodeUID: string;
    maxExpirationSeconds?: number;
    /** base64 DER SubjectPublicKeyInfo (1.35; deprecated in 1.36). */
    pkixPublicKey?: string;
    /** base64 signature over the pod UID (1.35; deprecated in 1.36). */
    proofOfPossession?: string;
    /** base64 DER PKCS#10 (1.36): the subject key, whose signature the API server verified. */
    stubPKCS10Request?: string;
    unverifiedUserAnnotations?: Record<string, string>;
  };
  status?: {
    conditions?: PcrCondition[];
    certificateChain?: string;
    notBefore?: string;
    beginRefreshAt?: string;
    notAfter?: string;
  };
}

export type PcrState = 'pending' | 'issued' | 'denied' | 'failed';

export function pcrState(pcr: Pick<PcrObject, 'status'>): PcrState {
  const c = pcr.status?.conditions?.find((x) => x.status === 'True' && (x.type === 'Issued' || x.type === 'Denied' || x.type === 'Failed'));
  return c === undefined ? 'pending' : (c.type.toLowerCase() as PcrState);
}

/** The informer over one signer's requests in every namespace. */
export function createPcrInformer(options: SignerNameInformerOptions<PcrObject>): Informer<PcrObject> {
  return createSignerNameInformer('podcertificaterequests', PCR_COLLECTION_PATH, options);
}

/** The PodCertificateRequest calls, each bounded by `signal`. */
export class PcrClient {
  readonly #kubeConfig: KubeConfig;
  readonly #now: () => number;

  constructor(kubeConfig: KubeConfig, now: () => number) {
    this.#kubeConfig = kubeConfig;
    this.#now = now;
  }

  /** PUT `/status` with `status` replacing the current one (the object's resourceVersion guards it). */
  async writeStatus(pcr: PcrObject, status: NonNullable<PcrObject['status']>, signal: AbortSignal): Promise<PcrObject> {
    const m = pcr.metadata ?? {};
    const path = `/apis/certificates.k8s.io/v1beta1/namespaces/${encodeURIComponent(m.namespace ?? '')}/podcertificaterequests/${encodeURIComponent(m.name ?? '')}/status`;
    const body = { apiVersion: PCR_API_VERSION, kind: 'PodCertificateRequest', metadata: m, spec: pcr.spec, status };
    const res = await kubeRequest(this.#kubeConfig, path, {}, { method: 'PUT', body, signal, nowMs: this.#now() });
    return (await readJson(res, `PUT ${path}`, signal)) as PcrObject;
  }
}
