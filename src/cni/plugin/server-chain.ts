/**
 * The API server's certificate checked against the kubeconfig's CA by the plugin itself, so the
 * TLS context can be built with no trust store at all (`ca: []`): giving Node a `ca` makes it
 * parse its ~140 bundled root certificates first (Node 20), ~15 ms of a process that lives for
 * one ADD. kube-client runs this on the handshake's `secureConnect`, before any request byte is
 * written, and destroys the socket when it throws.
 *
 * What is checked, as OpenSSL's verifier and Go's crypto/x509 would for this one trust anchor:
 * - a path from the leaf through certificates the server sent to a configured CA certificate
 *   (or the leaf is itself one of them): each link by issuer name and key identifiers, the
 *   issuer's keyUsage allowing keyCertSign (`X509Certificate.checkIssued`, OpenSSL's
 *   X509_check_issued) and the signature (`verify`), at most 8 intermediates, none used twice;
 * - every issuer on the path (intermediates and the anchor) is a CA (basicConstraints cA) whose
 *   pathLenConstraint, when it has one, allows the intermediates below it (read with pki's DER
 *   reader: X509Certificate does not expose it);
 * - every certificate on the path, the anchor included, is within its validity window now;
 * - the leaf's extendedKeyUsage, when it has one, allows serverAuth;
 * - the host: `tls.checkServerIdentity` (DNS SANs with wildcards, IP SANs for an address, the
 *   subject CN only when there are no DNS SANs), what Node applies when it verifies.
 * Not checked: revocation (Node's verifier does not check it either without CRLs given), and name
 * constraints, policies and key usage beyond keyCertSign (docs/security.md).
 */
import { X509Certificate } from 'node:crypto';
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import { CniError } from './cni-error.js';
import { basicConstraintsOf } from '../../pki/leaf-facts.js';

/** At most this many certificates between the leaf and the anchor. */
export const MAX_INTERMEDIATES = 8;

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const ANY_EKU = '2.5.29.37.0';

/** The API server's certificate is not one the kubeconfig trusts: a configuration problem (100). */
export class UntrustedServerError extends CniError {
  constructor(host: string, reason: string) {
    super('ERR_CNI_KUBE_API', `API server ${host}: certificate not trusted: ${reason}`, {
      details: "the kubeconfig's certificate-authority does not vouch for the server it connected to",
    });
  }
}

/** The PEM certificates of a CA bundle (the kubeconfig's certificate-authority), parsed once. */
export function parseCaBundle(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/gu) ?? [];
  const out: X509Certificate[] = [];
  for (const block of blocks) {
    try {
      out.push(new X509Certificate(block));
    } catch {
      throw new CniError('ERR_CNI_INVALID_CONFIG', 'kubeconfig certificate-authority holds a certificate that cannot be parsed');
    }
  }
  if (out.length === 0) throw new CniError('ERR_CNI_INVALID_CONFIG', 'kubeconfig certificate-authority holds no PEM certificate');
  return out;
}

export interface ServerChainCheck {
  /** DER certificates as the server sent them, leaf first. */
  readonly chainDer: readonly Buffer[];
  /** Node's view of the leaf (for `checkServerIdentity`). */
  readonly peer: PeerCertificate;
  /** The host the client connected to: a DNS name or an IP address (no brackets). */
  readonly host: string;
  readonly anchors: readonly X509Certificate[];
  readonly nowMs: number;
}

function within(cert: X509Certificate, nowMs: number): string | undefined {
  const from = Date.parse(cert.validFrom);
  const to = Date.parse(cert.validTo);
  if (!Number.isFinite(from) || !Number.isFinite(to)) return `${cert.subject || 'certificate'} has an unreadable validity period`;
  if (nowMs < from) return `${cert.subject || 'certificate'} is not valid before ${cert.validFrom}`;
  if (nowMs > to) return `${cert.subject || 'certificate'} expired at ${cert.validTo}`;
  return undefined;
}

/** Why `issuer` may not sign for a path with `below` intermediates under it, or undefined. */
function issuerProblem(issuer: X509Certificate, below: number, nowMs: number): string | undefined {
  if (!issuer.ca) return `its issuer ${issuer.subject} is not a CA`;
  let pathLen: number | undefined;
  try {
    pathLen = basicConstraintsOf(issuer.raw)?.pathLen;
  } catch {
    return `its issuer ${issuer.subject} has unreadable basicConstraints`;
  }
  if (pathLen !== undefined && below > pathLen) return `its issuer ${issuer.subject} allows ${pathLen} intermediates below it, the path has ${below}`;
  return within(issuer, nowMs);
}

function issued(child: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return child.checkIssued(issuer) && child.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

/**
 * The reason the path from `leaf` does not reach an anchor, or undefined when it does. Depth-first
 * over the sent certificates, as a path builder must: a server may send extra or stale ones.
 */
function pathProblem(current: X509Certificate, pool: readonly X509Certificate[], check: ServerChainCheck, used: ReadonlySet<X509Certificate>): string | undefined {
  let last: string | undefined;
  for (const anchor of check.anchors) {
    if (!issued(current, anchor)) continue;
    const problem = issuerProblem(anchor, used.size, check.nowMs);
    if (problem === undefined) return undefined;
    last = problem;
  }
  if (used.size >= MAX_INTERMEDIATES) return last ?? `no path to the configured CA within ${MAX_INTERMEDIATES} intermediates`;
  for (const next of pool) {
    if (used.has(next) || !issued(current, next)) continue;
    const problem = issuerProblem(next, used.size, check.nowMs);
    if (problem !== undefined) {
      last = problem;
      continue;
    }
    const deeper = pathProblem(next, pool, check, new Set([...used, next]));
    if (deeper === undefined) return undefined;
    last = deeper;
  }
  return last ?? 'not signed by the configured CA';
}

/** Throws UntrustedServerError unless the server's chain is trusted for `host` (see above). */
export function verifyServerChain(check: ServerChainCheck): void {
  const [leafDer, ...rest] = check.chainDer;
  if (leafDer === undefined) throw new UntrustedServerError(check.host, 'the server sent no certificate');
  let leaf: X509Certificate;
  let pool: X509Certificate[];
  try {
    leaf = new X509Certificate(leafDer);
    pool = rest.map((d) => new X509Certificate(d));
  } catch {
    throw new UntrustedServerError(check.host, 'the server sent a certificate that cannot be parsed');
  }
  const fail = (reason: string): never => {
    throw new UntrustedServerError(check.host, reason);
  };
  const expired = within(leaf, check.nowMs);
  if (expired !== undefined) fail(expired);
  const eku = leaf.keyUsage;
  if (eku !== undefined && eku.length > 0 && !eku.includes(SERVER_AUTH) && !eku.includes(ANY_EKU)) fail('its extendedKeyUsage does not allow serverAuth');
  const identity = checkServerIdentity(check.host, check.peer);
  if (identity !== undefined) fail(identity.message);
  // The configured CA itself as the server certificate (a self-signed API server).
  if (check.anchors.some((a) => a.raw.equals(leaf.raw))) return;
  const problem = pathProblem(leaf, pool, check, new Set());
  if (problem !== undefined) fail(problem);
}
