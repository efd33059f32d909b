/**
 * Serving names: the DNS and IP subject alternative names a leaf may carry next to its one URI
 * SAN, so it can also serve TLS to clients that dial a host name or an address (the node
 * broker's Istio CA front: ztunnel dials `localhost:15012` and verifies `localhost`). The leaf
 * stays an X509-SVID (X509-SVID §2: exactly one URI SAN, any number of other SAN types).
 *
 * A name is an IPv4/IPv6 literal or a DNS host name (LDH labels, case-insensitive, no wildcard,
 * no trailing dot). `canonicalServingName` gives the form names are compared in (lowercase DNS;
 * an IP in Node's normal text form), `encodeServingNames` the GeneralName DER, in Go's
 * crypto/x509 order (every dNSName, then every iPAddress; the URI comes after them). Pure.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { tlv } from './der.js';
import { PkiError } from './errors.js';

/** Most serving names one leaf may carry. */
export const MAX_SERVING_NAMES = 16;

const DNS_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$/;
/** GeneralName tags: [2] dNSName (IA5String), [7] iPAddress (OCTET STRING). */
const TAG_DNS_NAME = 0x82;
const TAG_IP_ADDRESS = 0x87;

export type ServingNameKind = 'dns' | 'ip';

/** What `name` is, or undefined when it is neither an IP literal nor a DNS host name. */
export function servingNameKind(name: string): ServingNameKind | undefined {
  if (isIPv4(name) || isIPv6(name)) return 'ip';
  return name.length <= 253 && DNS_NAME.test(name.toLowerCase()) ? 'dns' : undefined;
}

/** Why `name` cannot be a serving name, or undefined when it can. */
export function servingNameProblem(name: string): string | undefined {
  return servingNameKind(name) === undefined ? `${JSON.stringify(name.slice(0, 80))} is neither an IP address nor a DNS host name` : undefined;
}

/** The 4 or 16 address bytes of an IP literal. */
export function ipAddressBytes(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.from(ip.split('.').map(Number));
  if (!isIPv6(ip)) throw new PkiError('ERR_PKI_CERT_INVALID', `${JSON.stringify(ip)} is not an IP address`);
  let text = ip.replace(/%.*$/, '');
  // A trailing dotted quad (::ffff:1.2.3.4) becomes two hex groups.
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (quad) {
    const b = quad[1]!.split('.').map(Number);
    text = `${text.slice(0, -quad[1]!.length)}${((b[0]! << 8) | b[1]!).toString(16)}:${((b[2]! << 8) | b[3]!).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

/** The form names are compared in: DNS lowercased, IPs as their address bytes in hex. */
export function canonicalServingName(name: string): string {
  const kind = servingNameKind(name);
  if (kind === 'ip') return `ip:${ipAddressBytes(name).toString('hex')}`;
  return `dns:${name.toLowerCase()}`;
}

/**
 * The GeneralName DER of `names` (dNSNames first, then iPAddresses, each group in the given
 * order), to be followed by the URI in the subjectAltName. Throws ERR_PKI_CERT_INVALID for a
 * name that is neither kind or for more than MAX_SERVING_NAMES.
 */
export function encodeServingNames(names: readonly string[]): Buffer {
  if (names.length > MAX_SERVING_NAMES) {
    throw new PkiError('ERR_PKI_CERT_INVALID', `${names.length} serving names, at most ${MAX_SERVING_NAMES}`);
  }
  const dns: Buffer[] = [];
  const ips: Buffer[] = [];
  for (const name of names) {
    const kind = servingNameKind(name);
    if (kind === undefined) throw new PkiError('ERR_PKI_CERT_INVALID', servingNameProblem(name)!);
    if (kind === 'dns') dns.push(tlv(TAG_DNS_NAME, Buffer.from(name.toLowerCase(), 'ascii')));
    else ips.push(tlv(TAG_IP_ADDRESS, ipAddressBytes(name)));
  }
  return Buffer.concat([...dns, ...ips]);
}

/** `names` split by kind, in the order `encodeServingNames` writes them (for the reference builder). */
export function servingNamesByKind(names: readonly string[]): { readonly dns: string[]; readonly ips: string[] } {
  return {
    dns: names.filter((n) => servingNameKind(n) === 'dns').map((n) => n.toLowerCase()),
    ips: names.filter((n) => servingNameKind(n) === 'ip'),
  };
}
