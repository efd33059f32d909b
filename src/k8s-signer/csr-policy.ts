/**
 * What `certbroker k8s-signer` signs for a CertificateSigningRequest (pure: plain data in, a
 * verdict out). A workload request carries exactly one URI SAN, a SPIFFE ID of the signer's trust
 * domain, and nothing else (no DNS, IP, e-mail or other SANs), and asks only for the usages of an
 * X509-SVID (digital signature, key encipherment, server auth, client auth). The one exception is
 * names for TLS servers, from a service account on the `servingRequesters` list (`namespace/name`,
 * the CA: it creates the requests of the callers it authorized, serving names included): DNS/IP
 * SANs next to the SPIFFE URI (a node broker's own SVID for its Istio CA front), or DNS/IP SANs
 * alone with server-auth usages (the CA's own TLS certificate), which get the requester's own
 * SPIFFE ID. Anything else is refused with a reason that goes into the Failed condition.
 */
import { parseSpiffeId } from '../spiffe/id.js';
import { kubernetesIdentity } from '../spiffe/kubernetes.js';

/** The Failed condition's `reason` for each refusal (CamelCase, as Kubernetes reasons are). */
export type CsrRefusalReason =
  /** The request is not a parsable PKCS#10 CSR, its signature does not verify, or its key type is not supported. */
  | 'InvalidRequest'
  /** The SANs are not one SPIFFE URI (or not a serving request from a permitted requester). */
  | 'SANNotAllowed'
  /** The SPIFFE ID is not valid or not of this trust domain. */
  | 'SPIFFEIDNotAllowed'
  /** A usage beyond those of the certificate asked for. */
  | 'UsageNotAllowed';

export interface CsrRequestFacts {
  readonly uris: readonly string[];
  readonly dnsNames: readonly string[];
  readonly ipAddresses: readonly string[];
  readonly emails: readonly string[];
  readonly otherSans: number;
  readonly usages: readonly string[];
  /** `spec.username`: who created the request (set by the API server). */
  readonly username: string;
}

export interface CsrPolicy {
  readonly trustDomain: string;
  /** Service accounts (`namespace/name`) who may get DNS/IP serving certificates (the CA's own). */
  readonly servingRequesters: readonly string[];
}

export type CsrVerdict =
  | { readonly kind: 'svid'; readonly spiffeId: string; readonly names?: readonly string[] }
  | { readonly kind: 'serving'; readonly spiffeId: string; readonly names: readonly string[] }
  | { readonly kind: 'refused'; readonly reason: CsrRefusalReason; readonly message: string };

export const SVID_USAGES: readonly string[] = ['digital signature', 'key encipherment', 'server auth', 'client auth'];
export const SERVING_USAGES: readonly string[] = ['digital signature', 'key encipherment', 'server auth'];

function refused(reason: CsrRefusalReason, message: string): CsrVerdict {
  return { kind: 'refused', reason, message };
}

function extraUsages(usages: readonly string[], allowed: readonly string[]): string[] {
  return usages.filter((u) => !allowed.includes(u));
}

export function judgeCsr(facts: CsrRequestFacts, policy: CsrPolicy): CsrVerdict {
  if (facts.emails.length > 0 || facts.otherSans > 0) return refused('SANNotAllowed', 'e-mail and other SAN kinds are not signed; ask for one SPIFFE URI SAN');
  const names = [...facts.dnsNames, ...facts.ipAddresses];
  if (facts.uris.length === 0 && names.length > 0) return servingVerdict(facts, names, policy);
  if (facts.uris.length !== 1) return refused('SANNotAllowed', `want exactly one URI SAN (a SPIFFE ID), found ${facts.uris.length}`);
  if (names.length > 0 && !servingRequester(facts.username, policy)) return refused('SANNotAllowed', `DNS/IP SANs next to the SPIFFE ID are signed only for ${policy.servingRequesters.join(', ') || 'nobody'}`);
  const uri = facts.uris[0]!;
  let trustDomain: string;
  try {
    trustDomain = parseSpiffeId(uri).trustDomain;
  } catch {
    return refused('SPIFFEIDNotAllowed', `URI SAN ${JSON.stringify(uri)} is not a valid SPIFFE ID`);
  }
  if (trustDomain !== policy.trustDomain) return refused('SPIFFEIDNotAllowed', `SPIFFE ID ${uri} is not of trust domain ${policy.trustDomain}`);
  const extra = extraUsages(facts.usages, SVID_USAGES);
  if (extra.length > 0) return refused('UsageNotAllowed', `usages ${JSON.stringify(extra)} are not those of an X509-SVID (${SVID_USAGES.join(', ')})`);
  return { kind: 'svid', spiffeId: uri, ...(names.length > 0 ? { names } : {}) };
}

const SERVICE_ACCOUNT_USER = /^system:serviceaccount:([^:]+):([^:]+)$/u;

/** The requester's `namespace/name` when it is a service account on the serving list. */
function servingRequester(username: string, policy: CsrPolicy): readonly [string, string] | undefined {
  const account = SERVICE_ACCOUNT_USER.exec(username);
  return account && policy.servingRequesters.includes(`${account[1]}/${account[2]}`) ? [account[1]!, account[2]!] : undefined;
}

function servingVerdict(facts: CsrRequestFacts, names: readonly string[], policy: CsrPolicy): CsrVerdict {
  const account = servingRequester(facts.username, policy);
  if (!account) {
    return refused('SANNotAllowed', `DNS/IP serving certificates are signed only for ${policy.servingRequesters.join(', ') || 'nobody'}; ask for one SPIFFE URI SAN`);
  }
  const extra = extraUsages(facts.usages, SERVING_USAGES);
  if (extra.length > 0 || !facts.usages.includes('server auth')) {
    return refused('UsageNotAllowed', `a serving certificate has the usages ${SERVING_USAGES.join(', ')} (server auth required)`);
  }
  return { kind: 'serving', spiffeId: kubernetesIdentity(policy.trustDomain, account[0], account[1]), names };
}
