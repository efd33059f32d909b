/**
 * The X509-SVID rules (SPIFFE X509-SVID specification) checked over a parsed certificate:
 * - exactly one URI SAN, and it is a valid SPIFFE ID;
 * - leaf: the ID has a non-root path; basicConstraints cA false (or absent); keyUsage
 *   present and critical with digitalSignature and without keyCertSign/cRLSign; an
 *   extKeyUsage, when present, has both serverAuth and clientAuth;
 * - the SAN extension is critical when the subject is empty (RFC 5280 4.2.1.6);
 * - signing certificate: cA true, keyUsage critical with keyCertSign; its URI SAN is
 *   optional, and when present the ID has no path.
 * `x509SvidProblems` lists every violation; `checkX509Svid` throws the first one.
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { SpiffeError } from './errors.js';
import { parseSpiffeId, type SpiffeId } from './id.js';

export type SvidRole = 'leaf' | 'signing';

export interface SvidCheckOptions {
  /** 'leaf' (default) for an X509-SVID, 'signing' for a CA certificate in the chain. */
  readonly role?: SvidRole;
}

export interface SvidCheckResult {
  /** The SPIFFE ID from the URI SAN, when there is exactly one valid one. */
  readonly spiffeId: SpiffeId | undefined;
  readonly problems: readonly SpiffeError[];
}

const OID_SAN = '2.5.29.17';
const OID_KEY_USAGE = '2.5.29.15';
const OID_BASIC_CONSTRAINTS = '2.5.29.19';
const OID_EXT_KEY_USAGE = '2.5.29.37';
const EKU_SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const EKU_CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

type CertInput = x509.X509Certificate | Uint8Array | string;

function toCertificate(input: CertInput): x509.X509Certificate {
  if (input instanceof x509.X509Certificate) return input;
  try {
    return new x509.X509Certificate(input as string | Uint8Array<ArrayBuffer>);
  } catch (err) {
    throw new SpiffeError('ERR_SVID_CERT_UNPARSEABLE', 'certificate cannot be parsed', err);
  }
}

function subjectIsEmpty(cert: x509.X509Certificate): boolean {
  // An empty RDNSequence encodes as 30 00.
  return cert.subjectName.toArrayBuffer().byteLength <= 2;
}

/** Every X509-SVID rule the certificate breaks (empty when it is a valid SVID for `role`). */
export function x509SvidProblems(input: CertInput, options: SvidCheckOptions = {}): SvidCheckResult {
  const role = options.role ?? 'leaf';
  const cert = toCertificate(input);
  const problems: SpiffeError[] = [];
  let spiffeId: SpiffeId | undefined;

  let extensions: x509.Extension[];
  try {
    extensions = cert.extensions;
  } catch (err) {
    return { spiffeId: undefined, problems: [new SpiffeError('ERR_SVID_CERT_UNPARSEABLE', 'certificate extensions cannot be parsed', err)] };
  }
  const sanExt = extensions.find((e) => e.type === OID_SAN);
  let uris: string[] = [];
  if (sanExt) {
    try {
      const san = new x509.SubjectAlternativeNameExtension(sanExt.rawData);
      uris = san.names.items.filter((n) => n.type === 'url').map((n) => n.value);
    } catch (err) {
      problems.push(new SpiffeError('ERR_SVID_CERT_UNPARSEABLE', 'subjectAltName extension cannot be parsed', err));
    }
    if (!sanExt.critical && subjectIsEmpty(cert)) {
      problems.push(new SpiffeError('ERR_SVID_SAN_NOT_CRITICAL', 'subject is empty but subjectAltName is not critical'));
    }
  }
  if (uris.length === 0) {
    if (role === 'leaf') problems.push(new SpiffeError('ERR_SVID_URI_SAN_MISSING', 'certificate has no URI SAN'));
  } else if (uris.length > 1) {
    problems.push(new SpiffeError('ERR_SVID_URI_SAN_MULTIPLE', `certificate has ${uris.length} URI SANs, exactly one is allowed`));
  } else {
    try {
      spiffeId = parseSpiffeId(uris[0]!);
    } catch (err) {
      const code = err instanceof SpiffeError ? err.code : 'unknown';
      problems.push(new SpiffeError('ERR_SVID_ID_INVALID', `URI SAN is not a valid SPIFFE ID (${code})`, err));
    }
  }

  const bcExt = extensions.find((e) => e.type === OID_BASIC_CONSTRAINTS);
  const kuExt = extensions.find((e) => e.type === OID_KEY_USAGE);
  const ekuExt = extensions.find((e) => e.type === OID_EXT_KEY_USAGE);
  let isCa = false;
  let usages = 0;
  let ekus: string[] | undefined;
  try {
    isCa = bcExt ? new x509.BasicConstraintsExtension(bcExt.rawData).ca : false;
    usages = kuExt ? new x509.KeyUsagesExtension(kuExt.rawData).usages : 0;
    ekus = ekuExt ? new x509.ExtendedKeyUsageExtension(ekuExt.rawData).usages.map(String) : undefined;
  } catch (err) {
    problems.push(new SpiffeError('ERR_SVID_CERT_UNPARSEABLE', 'basicConstraints or keyUsage cannot be parsed', err));
    return { spiffeId, problems };
  }

  if (spiffeId && role === 'leaf' && spiffeId.path === '') {
    problems.push(new SpiffeError('ERR_SVID_LEAF_ID_NO_PATH', 'a leaf SVID\'s SPIFFE ID must have a path'));
  }
  if (spiffeId && role === 'signing' && spiffeId.path !== '') {
    problems.push(new SpiffeError('ERR_SVID_SIGNING_ID_HAS_PATH', 'a signing certificate\'s SPIFFE ID must not have a path'));
  }
  if (role === 'leaf') {
    if (ekus && !(ekus.includes(EKU_SERVER_AUTH) && ekus.includes(EKU_CLIENT_AUTH))) {
      problems.push(new SpiffeError('ERR_SVID_LEAF_EXT_KEY_USAGE', 'leaf extKeyUsage must include serverAuth and clientAuth'));
    }
    if (isCa) problems.push(new SpiffeError('ERR_SVID_LEAF_IS_CA', 'leaf certificate has basicConstraints cA=true'));
    if (!kuExt) {
      problems.push(new SpiffeError('ERR_SVID_KEY_USAGE_MISSING', 'leaf certificate has no keyUsage extension'));
    } else {
      if (!kuExt.critical) problems.push(new SpiffeError('ERR_SVID_KEY_USAGE_NOT_CRITICAL', 'keyUsage is not critical'));
      if (!(usages & x509.KeyUsageFlags.digitalSignature)) {
        problems.push(new SpiffeError('ERR_SVID_KEY_USAGE_NO_DIGITAL_SIGNATURE', 'keyUsage lacks digitalSignature'));
      }
      if (usages & x509.KeyUsageFlags.keyCertSign) {
        problems.push(new SpiffeError('ERR_SVID_LEAF_KEY_CERT_SIGN', 'leaf keyUsage has keyCertSign'));
      }
      if (usages & x509.KeyUsageFlags.cRLSign) {
        problems.push(new SpiffeError('ERR_SVID_LEAF_CRL_SIGN', 'leaf keyUsage has cRLSign'));
      }
    }
  } else {
    if (!isCa) problems.push(new SpiffeError('ERR_SVID_SIGNING_NOT_CA', 'signing certificate lacks basicConstraints cA=true'));
    if (!kuExt) {
      problems.push(new SpiffeError('ERR_SVID_KEY_USAGE_MISSING', 'signing certificate has no keyUsage extension'));
    } else {
      if (!kuExt.critical) problems.push(new SpiffeError('ERR_SVID_KEY_USAGE_NOT_CRITICAL', 'keyUsage is not critical'));
      if (!(usages & x509.KeyUsageFlags.keyCertSign)) {
        problems.push(new SpiffeError('ERR_SVID_SIGNING_NO_KEY_CERT_SIGN', 'signing certificate keyUsage lacks keyCertSign'));
      }
    }
  }
  return { spiffeId, problems };
}

/** Returns the SVID's SPIFFE ID (leaf) or throws the first rule it breaks as a SpiffeError. */
export function checkX509Svid(input: CertInput, options: SvidCheckOptions = {}): SpiffeId | undefined {
  const { spiffeId, problems } = x509SvidProblems(input, options);
  if (problems.length > 0) throw problems[0]!;
  return spiffeId;
}

/**
 * Checks a whole X509-SVID chain: the first certificate as a leaf SVID, every following one
 * (intermediates, and roots if given) as a signing certificate. Returns the leaf's SPIFFE ID
 * and every problem, each prefixed with the position it was found at.
 */
export function x509SvidChainProblems(chain: readonly CertInput[]): SvidCheckResult {
  if (chain.length === 0) {
    return { spiffeId: undefined, problems: [new SpiffeError('ERR_SVID_CERT_UNPARSEABLE', 'empty certificate chain')] };
  }
  const leaf = x509SvidProblems(chain[0]!, { role: 'leaf' });
  const problems = [...leaf.problems];
  for (let i = 1; i < chain.length; i++) {
    for (const p of x509SvidProblems(chain[i]!, { role: 'signing' }).problems) {
      problems.push(new SpiffeError(p.code, `chain[${i}]: ${p.message}`, p));
    }
  }
  return { spiffeId: leaf.spiffeId, problems };
}
