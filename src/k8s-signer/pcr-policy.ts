/**
 * What `certbroker k8s-signer` does with a PodCertificateRequest for its signerName (pure):
 * the identity is the X509-SVID of the pod's service account, spiffe://<td>/ns/<ns>/sa/<sa>;
 * requests naming unverifiedUserAnnotations keys it does not know are Denied
 * (InvalidUnverifiedUserAnnotations, as the KEP asks signers to: it knows none), keys it cannot
 * certify are Denied with UnsupportedKeyType and the key type it suggests; the leaf lives
 * min(maxExpirationSeconds, the signer's max) including the 2-minute backdate (the API server
 * refuses a lifetime above maxExpirationSeconds), and beginRefreshAt is half-way through,
 * within the API server's [notBefore + 10 min, notAfter - 10 min].
 */
import { importSubjectKey, LEAF_BACKDATE_MS, parseCsr, PkiError } from '../pki/index.js';
import { kubernetesIdentity } from '../spiffe/index.js';

export type PcrRefusalReason = 'UnsupportedKeyType' | 'InvalidUnverifiedUserAnnotations' | 'InvalidRequest';

/** The key type suggested to a request whose key the signer cannot certify. */
export const SUGGESTED_KEY_TYPE = 'ECDSAP256';
/** Key types of kubelet's podCertificate volumes the signer certifies. */
export const SUPPORTED_KEY_TYPES = ['ECDSAP256', 'ECDSAP384', 'RSA3072', 'RSA4096'] as const;
const MINUTE_MS = 60_000;
/** kube-apiserver's shortest PodCertificateRequest leaf (1 h). */
export const PCR_MIN_LIFETIME_SECONDS = 3600;
export const MIN_PCR_LIFETIME_MS = PCR_MIN_LIFETIME_SECONDS * 1000;

export interface PcrFacts {
  readonly namespace: string;
  readonly serviceAccountName: string;
  readonly maxExpirationSeconds: number | undefined;
  readonly unverifiedUserAnnotations: Readonly<Record<string, string>> | undefined;
  /** base64 DER, as on the wire. */
  readonly pkixPublicKey: string | undefined;
  readonly stubPKCS10Request: string | undefined;
}

/** How the leaf's key reaches the CA: a bare key, or the stub CSR's (PEM). */
export type SubjectKey = { readonly kind: 'pkix'; readonly spkiDer: Buffer } | { readonly kind: 'stub'; readonly csrDer: Buffer };

export type PcrVerdict =
  | { readonly kind: 'sign'; readonly spiffeId: string; readonly ttlSeconds: number; readonly key: SubjectKey }
  | { readonly kind: 'denied'; readonly reason: PcrRefusalReason; readonly message: string };

const denied = (reason: PcrRefusalReason, message: string): PcrVerdict => ({ kind: 'denied', reason, message });

function unsupported(err: unknown): boolean {
  return err instanceof PkiError && (err.code === 'ERR_PKI_CSR_UNSUPPORTED_KEY' || err.code === 'ERR_PKI_CSR_UNSUPPORTED_ALGORITHM' || err.code === 'ERR_PKI_KEY_UNSUPPORTED');
}

function subjectKey(f: PcrFacts): SubjectKey | PcrVerdict {
  const keyTypes = `supported key types: ${SUPPORTED_KEY_TYPES.join(', ')}; suggested: ${SUGGESTED_KEY_TYPE}`;
  try {
    if (f.stubPKCS10Request) {
      const csrDer = Buffer.from(f.stubPKCS10Request, 'base64');
      parseCsr(csrDer);
      return { kind: 'stub', csrDer };
    }
    const spkiDer = Buffer.from(f.pkixPublicKey ?? '', 'base64');
    importSubjectKey(spkiDer);
    return { kind: 'pkix', spkiDer };
  } catch (err) {
    if (unsupported(err)) return denied('UnsupportedKeyType', `this signer cannot certify the request's key (${err instanceof Error ? err.message : 'unsupported'}); ${keyTypes}`);
    return denied('InvalidRequest', `the request's public key cannot be read: ${err instanceof Error ? err.message : 'unreadable'}`);
  }
}

/** The verdict on a pending request; `maxTtlSeconds` is the signer's own ceiling. */
export function judgePcr(f: PcrFacts, o: { readonly trustDomain: string; readonly maxTtlSeconds: number }): PcrVerdict {
  const keys = Object.keys(f.unverifiedUserAnnotations ?? {});
  if (keys.length > 0) {
    return denied('InvalidUnverifiedUserAnnotations', `this signer recognizes no unverifiedUserAnnotations keys; got ${keys.map((k) => JSON.stringify(k)).join(', ')}`);
  }
  const key = subjectKey(f);
  if (key.kind === 'denied' || key.kind === 'sign') return key;
  const lifetimeSeconds = Math.min(f.maxExpirationSeconds ?? 86400, o.maxTtlSeconds);
  return {
    kind: 'sign',
    spiffeId: kubernetesIdentity(o.trustDomain, f.namespace, f.serviceAccountName),
    ttlSeconds: lifetimeSeconds - LEAF_BACKDATE_MS / 1000,
    key,
  };
}

/** beginRefreshAt for a leaf valid [notBefore, notAfter]: half-way, kept 10 minutes off either end. */
export function beginRefreshAtMs(notBeforeMs: number, notAfterMs: number): number {
  const half = notBeforeMs + Math.floor((notAfterMs - notBeforeMs) / 2 / 1000) * 1000;
  return Math.min(Math.max(half, notBeforeMs + 10 * MINUTE_MS), notAfterMs - 10 * MINUTE_MS);
}
