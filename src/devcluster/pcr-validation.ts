/**
 * PodCertificateRequest (certificates.k8s.io/v1beta1, KEP-4317) validation as kube-apiserver
 * 1.35 does it (pkg/apis/certificates/validation: ValidatePodCertificateRequestCreate /
 * ValidatePodCertificateRequestStatusUpdate), on plain JSON: field rules, the
 * maxExpirationSeconds range, and the proof of possession — the pod UID signed with the
 * subject key (Ed25519 over the UID; ECDSA ASN.1 and RSA-PSS over its SHA-256).
 * `spec.stubPKCS10Request` (1.36's replacement for pkixPublicKey + proofOfPossession) is
 * accepted too: a PKCS#10 whose signature verifies, with the other two fields empty.
 * Messages are upstream's, so clients see what a real server says.
 */
import { createPublicKey, verify, constants, type KeyObject } from 'node:crypto';
import { parseCsr, PkiError } from '../pki/index.js';
import { signerNameProblem } from '../core/signer-name.js';
import type { KubeObject } from './store.js';
import { SUBDOMAIN, SUBDOMAIN_MSG } from './admission.js';
import type { StatusCause } from './status.js';

export const PCR_DEFAULT_MAX_EXPIRATION_SECONDS = 86400;
export const PCR_MIN_MAX_EXPIRATION_SECONDS = 3600;
/** kubernetes.io/* signers. */
export const PCR_KUBERNETES_MAX_MAX_EXPIRATION_SECONDS = 86400;
/** Every other signer: 91.25 days. */
export const PCR_MAX_MAX_EXPIRATION_SECONDS = 7884000;
const MAX_KEY_BYTES = 10 * 1024;
const MAX_CHAIN_BYTES = 100 * 1024;
const MAX_USER_ANNOTATIONS_BYTES = 256 * 1024;
const MAX_UID = 128;

const QUALIFIED_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

export interface PcrSpec {
  signerName?: unknown;
  podName?: unknown;
  podUID?: unknown;
  serviceAccountName?: unknown;
  serviceAccountUID?: unknown;
  nodeName?: unknown;
  nodeUID?: unknown;
  maxExpirationSeconds?: unknown;
  pkixPublicKey?: unknown;
  proofOfPossession?: unknown;
  stubPKCS10Request?: unknown;
  unverifiedUserAnnotations?: unknown;
}

export interface PcrCondition {
  type?: unknown;
  status?: unknown;
  reason?: unknown;
  message?: unknown;
  lastTransitionTime?: unknown;
}

export interface PcrStatus {
  conditions?: PcrCondition[];
  certificateChain?: unknown;
  notBefore?: unknown;
  beginRefreshAt?: unknown;
  notAfter?: unknown;
}

export function specOf(o: KubeObject): PcrSpec {
  return (o.spec ?? {}) as PcrSpec;
}

export function statusOf(o: KubeObject): PcrStatus {
  return (o.status ?? {}) as PcrStatus;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

function bytesOf(v: unknown): Buffer {
  return typeof v === 'string' ? Buffer.from(v, 'base64') : Buffer.alloc(0);
}

/** apivalidation.ValidateSignerName (core/signer-name.ts). */
export function signerNameCauses(name: string, field = 'spec.signerName'): StatusCause[] {
  const problem = signerNameProblem(name);
  if (problem === undefined) return [];
  return [name === '' ? { field, reason: 'FieldValueRequired', message: problem } : { field, message: `Invalid value: "${name}": ${problem}` }];
}

function nameCauses(field: string, v: unknown): StatusCause[] {
  const name = str(v);
  if (name === '') return [{ field, message: `Invalid value: "": ${SUBDOMAIN_MSG}` }];
  if (!SUBDOMAIN.test(name) || name.length > 253) return [{ field, message: `Invalid value: "${name}": ${SUBDOMAIN_MSG}` }];
  return [];
}

function uidCauses(field: string, v: unknown): StatusCause[] {
  const uid = str(v);
  if (uid === '') return [{ field, message: 'Invalid value: "": must not be empty' }];
  if (uid.length > MAX_UID) return [{ field, reason: 'FieldValueTooLong', message: `Too long: may not be more than ${MAX_UID} bytes` }];
  return [];
}

/** apivalidation.ValidateUserAnnotations: domain-prefixed qualified keys, bounded total size. */
export function userAnnotationCauses(v: unknown, field = 'spec.unverifiedUserAnnotations'): StatusCause[] {
  if (v === undefined || v === null) return [];
  if (typeof v !== 'object' || Array.isArray(v)) return [{ field, reason: 'FieldValueTypeInvalid', message: 'Invalid value: must be a map of strings' }];
  const out: StatusCause[] = [];
  let size = 0;
  for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
    size += k.length + str(val).length;
    const slash = k.indexOf('/');
    const prefix = slash > 0 ? k.slice(0, slash) : '';
    const tail = slash > 0 ? k.slice(slash + 1) : k;
    if (prefix === '' || !SUBDOMAIN.test(prefix.toLowerCase()) || !QUALIFIED_NAME.test(tail) || tail.length > 63) {
      out.push({ field, message: `Invalid value: "${k}": must be a domain-prefixed key (such as "acme.io/foo")` });
    }
    if (typeof val !== 'string') out.push({ field: `${field}[${k}]`, reason: 'FieldValueTypeInvalid', message: 'Invalid value: must be a string' });
  }
  if (size > MAX_USER_ANNOTATIONS_BYTES) out.push({ field, reason: 'FieldValueTooLong', message: `Too long: must have at most ${MAX_USER_ANNOTATIONS_BYTES} bytes` });
  return out;
}

/** The maxExpirationSeconds range of a signer ([3600, 86400] for kubernetes.io/ signers, else [3600, 7884000]). */
export function expirationCauses(signerName: string, v: unknown, field = 'spec.maxExpirationSeconds'): StatusCause[] {
  if (v === undefined || v === null) return [{ field, reason: 'FieldValueRequired', message: 'Required value: must be set' }];
  const max = signerName.startsWith('kubernetes.io/') ? PCR_KUBERNETES_MAX_MAX_EXPIRATION_SECONDS : PCR_MAX_MAX_EXPIRATION_SECONDS;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < PCR_MIN_MAX_EXPIRATION_SECONDS || v > max) {
    return [{ field, message: `Invalid value: ${JSON.stringify(v)}: must be in the range [${PCR_MIN_MAX_EXPIRATION_SECONDS}, ${max}]` }];
  }
  return [];
}

const PKIX = 'spec.pkixPublicKey';
const POP = 'spec.proofOfPossession';
const STUB = 'spec.stubPKCS10Request';

/** The key-kind rules both the PKIX and the stub-CSR forms obey (upstream's switch on the key type). */
function keyKindCause(field: string, key: KeyObject): StatusCause | undefined {
  const type = key.asymmetricKeyType;
  const d = key.asymmetricKeyDetails ?? {};
  if (type === 'ed25519') return undefined;
  if (type === 'ec') {
    if (d.namedCurve === 'prime256v1' || d.namedCurve === 'secp384r1' || d.namedCurve === 'secp521r1') return undefined;
    return { field, message: `Invalid value: "curve ${String(d.namedCurve)}": elliptic public keys must use curve P256 or P384` };
  }
  if (type === 'rsa') {
    if (d.modulusLength === 3072 || d.modulusLength === 4096) return undefined;
    return { field, message: `Invalid value: "${String(d.modulusLength)}-bit modulus": RSA keys must have modulus size 3072 or 4096` };
  }
  return { field, message: 'Invalid value: unknown public key type; supported types are Ed25519, ECDSA, and RSA' };
}

/** Verifies the proof of possession: the pod UID signed by the subject key. */
export function proofVerifies(key: KeyObject, podUid: string, proof: Buffer): boolean {
  const data = Buffer.from(podUid, 'utf8');
  try {
    switch (key.asymmetricKeyType) {
      case 'ed25519':
        return verify(null, data, key, proof);
      case 'ec':
        return verify('sha256', data, { key, dsaEncoding: 'der' }, proof);
      case 'rsa':
        return verify('sha256', data, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_AUTO }, proof);
      default:
        return false;
    }
  } catch {
    return false;
  }
}

function pkixCauses(spec: PcrSpec): StatusCause[] {
  const der = bytesOf(spec.pkixPublicKey);
  const proof = bytesOf(spec.proofOfPossession);
  if (der.length > MAX_KEY_BYTES) return [{ field: PKIX, reason: 'FieldValueTooLong', message: `Too long: may not be more than ${MAX_KEY_BYTES} bytes` }];
  if (proof.length > MAX_KEY_BYTES) return [{ field: POP, reason: 'FieldValueTooLong', message: `Too long: may not be more than ${MAX_KEY_BYTES} bytes` }];
  let key: KeyObject;
  try {
    key = createPublicKey({ key: der, format: 'der', type: 'spki' });
  } catch {
    return [{ field: PKIX, message: 'Invalid value: must be a valid PKIX-serialized public key' }];
  }
  const kind = keyKindCause(PKIX, key);
  if (kind) return [kind];
  if (!proofVerifies(key, str(spec.podUID), proof)) return [{ field: POP, message: 'Invalid value: could not verify proof-of-possession signature' }];
  return [];
}

function stubCauses(spec: PcrSpec): StatusCause[] {
  if (bytesOf(spec.pkixPublicKey).length > 0 || bytesOf(spec.proofOfPossession).length > 0) {
    return [{ field: PKIX, reason: 'FieldValueForbidden', message: `Forbidden: must be empty when ${STUB} is set` }];
  }
  const der = bytesOf(spec.stubPKCS10Request);
  if (der.length > MAX_KEY_BYTES) return [{ field: STUB, reason: 'FieldValueTooLong', message: `Too long: may not be more than ${MAX_KEY_BYTES} bytes` }];
  let key: KeyObject;
  try {
    key = parseCsr(der).publicKey;
  } catch (err) {
    const why = err instanceof PkiError && err.code === 'ERR_PKI_CSR_SIGNATURE_INVALID' ? 'the PKCS#10 signature does not verify' : 'must be a valid PKCS#10 certificate signing request';
    return [{ field: STUB, message: `Invalid value: ${why}` }];
  }
  const kind = keyKindCause(STUB, key);
  return kind ? [kind] : [];
}

/** ValidatePodCertificateRequestCreate on a defaulted object (metadata is checked by the caller). */
export function pcrCreateCauses(obj: KubeObject): StatusCause[] {
  const spec = specOf(obj);
  const signer = str(spec.signerName);
  const out: StatusCause[] = [
    ...signerNameCauses(signer),
    ...userAnnotationCauses(spec.unverifiedUserAnnotations),
    ...nameCauses('spec.podName', spec.podName),
    ...uidCauses('spec.podUID', spec.podUID),
    ...nameCauses('spec.serviceAccountName', spec.serviceAccountName),
    ...uidCauses('spec.serviceAccountUID', spec.serviceAccountUID),
    ...nameCauses('spec.nodeName', spec.nodeName),
    ...uidCauses('spec.nodeUID', spec.nodeUID),
  ];
  const expiration = expirationCauses(signer, spec.maxExpirationSeconds);
  if (expiration.length > 0) return [...out, ...expiration];
  return [...out, ...(bytesOf(spec.stubPKCS10Request).length > 0 ? stubCauses(spec) : pkixCauses(spec))];
}

/** The public key the request is for (SPKI DER): the stub CSR's when set, else pkixPublicKey. */
export function requestedSpki(spec: PcrSpec): Buffer {
  const stub = bytesOf(spec.stubPKCS10Request);
  if (stub.length > 0) return parseCsr(stub).spki;
  return bytesOf(spec.pkixPublicKey);
}

export const MAX_PCR_CHAIN_BYTES = MAX_CHAIN_BYTES;

