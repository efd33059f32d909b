/**
 * `certificates.k8s.io/v1beta1` ClusterTrustBundle as kube-apiserver admits it:
 * - **name**: with `spec.signerName`, `<signerName with / as :>:<suffix>` (the suffix a DNS
 *   subdomain); without, a DNS subdomain with no `:`;
 * - **signerName**: the signer-name rule (`core/signer-name.ts`), immutable on update;
 * - **trustBundle**: at most 1 MiB of PEM CERTIFICATE blocks, no block headers, each an X.509
 *   CA certificate (basic constraints cA), no duplicates, at least one; on update parsed only
 *   when it changed (as the real validation does);
 * - **attest**: creating or updating a signer-linked bundle needs the `attest` verb on
 *   `signers` named after the signer (or `<domain>/*`), except an update that only touches
 *   ownerReferences/finalizers (the ctbattest admission plugin).
 */
import { X509Certificate } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { signerNameProblem } from '../core/signer-name.js';
import { parsePem } from '../pki/index.js';
import { SUBDOMAIN } from './admission.js';
import type { UserInfo } from './authn.js';
import { isAuthorizedForSignerName, type RbacAuthorizer } from './rbac.js';
import type { ResourceType } from './resources.js';
import type { KubeObject } from './store.js';
import { forbidden, invalid, type StatusCause } from './status.js';

const GROUP = 'certificates.k8s.io';
/** certificates.MaxTrustBundleSize. */
export const MAX_TRUST_BUNDLE_BYTES = 1024 * 1024;
const OMITTED = 'Invalid value: "<value omitted>"';

export function isClusterTrustBundle(t: ResourceType): boolean {
  return t.group === GROUP && t.plural === 'clustertrustbundles';
}

function specOf(obj: KubeObject | undefined): { signerName: string; trustBundle: unknown } {
  const spec = (obj?.spec ?? {}) as { signerName?: unknown; trustBundle?: unknown };
  return { signerName: typeof spec.signerName === 'string' ? spec.signerName : '', trustBundle: spec.trustBundle };
}

function nameProblem(name: string, signerName: string): string | undefined {
  const subdomain = (n: string) => (n !== '' && n.length <= 253 && SUBDOMAIN.test(n) ? undefined : "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character");
  if (signerName === '') return name.includes(':') ? 'ClusterTrustBundle without signer name must not have ":" in its name' : subdomain(name);
  const prefix = `${signerName.replaceAll('/', ':')}:`;
  if (!name.startsWith(prefix)) return `ClusterTrustBundle for signerName ${signerName} must be named with prefix ${prefix}`;
  return subdomain(name.slice(prefix.length));
}

/** The problems of a trust bundle text, worded as validateTrustBundle's. */
function bundleProblems(text: unknown): string[] {
  if (typeof text !== 'string') return ['Required value'];
  if (Buffer.byteLength(text) > MAX_TRUST_BUNDLE_BYTES) return [`Too long: may not be more than ${MAX_TRUST_BUNDLE_BYTES} bytes`];
  const out: string[] = [];
  const seen = new Map<string, number[]>();
  const blocks = [...text.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g)];
  blocks.forEach((m, i) => {
    if (m[1] !== 'CERTIFICATE') return void out.push(`entry ${i} has bad block type: ${m[1]}`);
    let der: Buffer;
    try {
      der = parsePem(m[0])[0]!.der;
    } catch (err) {
      return void out.push((err as { code?: string }).code === 'ERR_PKI_KEY_ENCRYPTED' ? `entry ${i} has PEM block headers` : `entry ${i} does not parse as X.509`);
    }
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(der);
    } catch {
      return void out.push(`entry ${i} does not parse as X.509`);
    }
    if (!cert.ca) return void out.push(`entry ${i} does not have the CA bit set`);
    const key = der.toString('base64');
    seen.set(key, [...(seen.get(key) ?? []), i]);
  });
  if (out.length > 0) return out;
  if (seen.size === 0) return ['at least one trust anchor must be provided'];
  for (const indices of seen.values()) if (indices.length > 1) out.push(`duplicate trust anchor (indices [${indices.join(' ')}])`);
  return out;
}

/** Throws 422 Invalid with every problem of `obj` (`prev`: the stored object on update). */
export function checkClusterTrustBundle(obj: KubeObject, prev?: KubeObject): void {
  const name = obj.metadata.name ?? '';
  const { signerName, trustBundle } = specOf(obj);
  const causes: StatusCause[] = [];
  const badName = nameProblem(name, signerName);
  if (badName) causes.push({ field: 'metadata.name', message: `Invalid value: ${JSON.stringify(name)}: ${badName}` });
  if (signerName !== '') {
    const bad = signerNameProblem(signerName);
    if (bad) causes.push({ field: 'spec.signerName', message: `Invalid value: ${JSON.stringify(signerName)}: ${bad}` });
  }
  if (prev === undefined || specOf(prev).trustBundle !== trustBundle) {
    for (const p of bundleProblems(trustBundle)) causes.push({ field: 'spec.trustBundle', message: p === 'Required value' || p.startsWith('Too long') ? p : `${OMITTED}: ${p}` });
  }
  if (prev !== undefined && specOf(prev).signerName !== signerName) causes.push({ field: 'spec.signerName', message: `Invalid value: ${JSON.stringify(signerName)}: field is immutable` });
  if (causes.length > 0) throw invalid('ClusterTrustBundle', GROUP, name, causes);
}

function withoutGcFields(o: KubeObject): KubeObject {
  const { ownerReferences: _o, finalizers: _f, resourceVersion: _r, managedFields: _m, generation: _g, ...meta } = o.metadata;
  return { ...o, metadata: meta };
}

/** The ctbattest admission plugin over the devcluster's RBAC. */
export function makeAttestCheck(rbac: RbacAuthorizer): (t: ResourceType, obj: KubeObject, user: UserInfo, prev?: KubeObject) => void {
  return (t, obj, user, prev) => {
    if (!isClusterTrustBundle(t)) return;
    const { signerName } = specOf(obj);
    if (signerName === '') return;
    if (prev !== undefined && isDeepStrictEqual(withoutGcFields(prev), withoutGcFields(obj))) return;
    if (isAuthorizedForSignerName(rbac, user, 'attest', signerName)) return;
    throw forbidden(`clustertrustbundles.${GROUP} "${obj.metadata.name ?? ''}" is forbidden: user not permitted to attest for signerName "${signerName}"`, {
      name: obj.metadata.name ?? '', group: GROUP, kind: 'clustertrustbundles',
    });
  };
}
