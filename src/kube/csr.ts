/**
 * certificates.k8s.io/v1 CertificateSigningRequests as both ends see them: the CA (which creates,
 * approves, waits for and deletes them) and `certbroker k8s-signer` (which signs them). The
 * object's JSON shape (what the informer caches), the condition rules of the real API (Approved
 * and Denied exclude each other; Failed ends a request; a certificate is issued once), the
 * informer over one signer's requests, and the CSR writes through client-node's
 * CertificatesV1Api with a deadline on every call.
 */
import { CertificatesV1Api, type KubeConfig, type KubernetesObject, type V1CertificateSigningRequest } from '@kubernetes/client-node';
import { abortableApi, KeptAliveAgents } from './abortable-http.js';
import type { Informer } from './informer.js';
import { createSignerNameInformer, type SignerNameInformerOptions } from './signer-name-informer.js';

const CSR_COLLECTION_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
/** The kube-apiserver's lower bound on `spec.expirationSeconds`. */
export const CSR_MIN_EXPIRATION_SECONDS = 600;

/** Key usages as the API spells them (the subset certbroker asks for and signs). */
export const USAGE_DIGITAL_SIGNATURE = 'digital signature';
export const USAGE_KEY_ENCIPHERMENT = 'key encipherment';
export const USAGE_SERVER_AUTH = 'server auth';
export const USAGE_CLIENT_AUTH = 'client auth';

export type CsrConditionType = 'Approved' | 'Denied' | 'Failed';

export interface CsrCondition {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
  readonly lastUpdateTime?: string;
  readonly lastTransitionTime?: string;
}

/** A CSR as JSON (base64 `request`/`certificate`, timestamps as strings). */
export interface CsrObject extends KubernetesObject {
  spec: {
    request: string;
    signerName: string;
    usages?: string[];
    expirationSeconds?: number;
    username?: string;
    uid?: string;
    groups?: string[];
  };
  status?: { conditions?: CsrCondition[]; certificate?: string };
}

/** The condition of `type` with status True, if any. */
export function trueCondition(csr: Pick<CsrObject, 'status'>, type: CsrConditionType): CsrCondition | undefined {
  return csr.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

/** Where a request stands: issued wins, then the terminal conditions, then approval. */
export type CsrState = 'pending' | 'approved' | 'denied' | 'failed' | 'issued';

export function csrState(csr: Pick<CsrObject, 'status'>): CsrState {
  if (csr.status?.certificate) return 'issued';
  if (trueCondition(csr, 'Failed')) return 'failed';
  if (trueCondition(csr, 'Denied')) return 'denied';
  if (trueCondition(csr, 'Approved')) return 'approved';
  return 'pending';
}

/** The PEM text of `spec.request` (base64 on the wire). */
export function csrRequestPem(csr: Pick<CsrObject, 'spec'>): string {
  return Buffer.from(csr.spec.request, 'base64').toString('utf8');
}

/** The PEM text of `status.certificate`, or undefined before issuance. */
export function csrCertificatePem(csr: Pick<CsrObject, 'status'>): string | undefined {
  const b64 = csr.status?.certificate;
  return b64 ? Buffer.from(b64, 'base64').toString('utf8') : undefined;
}

/** The informer over one signer's requests (field selector `spec.signerName`), optionally narrowed by labels. */
export function createCsrInformer(options: SignerNameInformerOptions<CsrObject>): Informer<CsrObject> {
  return createSignerNameInformer('certificatesigningrequests', CSR_COLLECTION_PATH, options);
}

const date = (iso: string | undefined): Date | undefined => (iso === undefined ? undefined : new Date(iso));

/**
 * A JSON CSR as client-node's typed object for a write: timestamps as Dates (its serializer
 * calls toISOString on them), metadata reduced to what a write carries (name, the
 * resourceVersion that guards it, uid, labels, annotations).
 */
function typed(csr: CsrObject): V1CertificateSigningRequest {
  const m = csr.metadata ?? {};
  return {
    apiVersion: 'certificates.k8s.io/v1',
    kind: 'CertificateSigningRequest',
    metadata: {
      ...(m.name !== undefined ? { name: m.name } : {}),
      ...(m.generateName !== undefined ? { generateName: m.generateName } : {}),
      ...(m.resourceVersion !== undefined ? { resourceVersion: m.resourceVersion } : {}),
      ...(m.uid !== undefined ? { uid: m.uid } : {}),
      ...(m.labels !== undefined ? { labels: m.labels } : {}),
      ...(m.annotations !== undefined ? { annotations: m.annotations } : {}),
    },
    spec: { ...csr.spec },
    ...(csr.status
      ? {
          status: {
            ...(csr.status.certificate !== undefined ? { certificate: csr.status.certificate } : {}),
            ...(csr.status.conditions
              ? { conditions: csr.status.conditions.map((c) => ({ ...c, lastUpdateTime: date(c.lastUpdateTime), lastTransitionTime: date(c.lastTransitionTime) })) }
              : {}),
          },
        }
      : {}),
  };
}

/** A typed answer back to JSON (what the informer would cache). */
function plain(csr: V1CertificateSigningRequest): CsrObject {
  return JSON.parse(JSON.stringify(csr)) as CsrObject;
}

/** The CSR calls, each bounded by `signal` (a deadline), over kept-alive connections until `close()`. */
export class CsrClient {
  readonly #kubeConfig: KubeConfig;
  readonly #agents = new KeptAliveAgents();

  constructor(kubeConfig: KubeConfig) {
    this.#kubeConfig = kubeConfig;
  }

  #api(signal: AbortSignal): CertificatesV1Api {
    return abortableApi(this.#kubeConfig, CertificatesV1Api, signal, this.#agents);
  }

  /** Closes the kept connections (a later call opens new ones). */
  close(): void {
    this.#agents.close();
  }

  async create(body: CsrObject, signal: AbortSignal): Promise<CsrObject> {
    return plain(await this.#api(signal).createCertificateSigningRequest({ body: typed(body) }));
  }

  /** PUT `/approval` with `condition` added (the object's resourceVersion guards the write). */
  async addApprovalCondition(csr: CsrObject, condition: CsrCondition, signal: AbortSignal): Promise<CsrObject> {
    const body = typed({ ...csr, status: { ...csr.status, conditions: [...(csr.status?.conditions ?? []), condition] } });
    return plain(await this.#api(signal).replaceCertificateSigningRequestApproval({ name: csr.metadata!.name!, body }));
  }

  /** PUT `/status` with `status` (certificate and/or conditions) replacing the current one. */
  async writeStatus(csr: CsrObject, status: NonNullable<CsrObject['status']>, signal: AbortSignal): Promise<CsrObject> {
    const body = typed({ ...csr, status });
    return plain(await this.#api(signal).replaceCertificateSigningRequestStatus({ name: csr.metadata!.name!, body }));
  }

  async delete(name: string, signal: AbortSignal): Promise<void> {
    await this.#api(signal).deleteCertificateSigningRequest({ name });
  }
}
