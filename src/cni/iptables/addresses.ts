/**
 * Strict IP address and CIDR parsing for the rule builder (pure, no I/O).
 *
 * CIDRs are printed the way Istio prints them (Go's `netip.Prefix.String()`): the address as
 * given (not masked to the network), IPv6 in RFC 5952 canonical form, the prefix length in
 * decimal.
 */

export type IpFamily = 'v4' | 'v6';

export interface Cidr {
  readonly family: IpFamily;
  /** Canonical text, e.g. `10.0.0.0/8`, `2001:db8::/32`. */
  readonly text: string;
  /** The address lies in the loopback range (127.0.0.0/8 or ::1). */
  readonly loopback: boolean;
  readonly prefixLength: number;
}

const V4_OCTET = /^(0|[1-9]\d{0,2})$/;

/** Parses dotted-quad IPv4 (no leading zeros, as Go's netip); returns the 4 octets or undefined. */
export function parseIPv4(text: string): number[] | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const octets: number[] = [];
  for (const p of parts) {
    if (!V4_OCTET.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    octets.push(n);
  }
  return octets;
}

/** Canonical (RFC 5952) text of an IPv6 address, or undefined when it is not one. */
export function canonicalIPv6(text: string): string | undefined {
  if (!text.includes(':') || !/^[0-9A-Fa-f:.]+$/.test(text)) return undefined;
  try {
    // The WHATWG URL parser validates IPv6 literals and serialises them in RFC 5952 form.
    const host = new URL(`http://[${text}]/`).hostname;
    return host.slice(1, -1);
  } catch {
    return undefined;
  }
}

export function ipFamily(text: string): IpFamily | undefined {
  if (parseIPv4(text) !== undefined) return 'v4';
  if (canonicalIPv6(text) !== undefined) return 'v6';
  return undefined;
}

/** Parses `addr/len`; undefined when malformed. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const addr = text.slice(0, slash);
  const lenText = text.slice(slash + 1);
  if (!/^(0|[1-9]\d{0,2})$/.test(lenText)) return undefined;
  const prefixLength = Number(lenText);
  const v4 = parseIPv4(addr);
  if (v4 !== undefined) {
    if (prefixLength > 32) return undefined;
    return { family: 'v4', text: `${addr}/${prefixLength}`, loopback: v4[0] === 127, prefixLength };
  }
  const v6 = canonicalIPv6(addr);
  if (v6 !== undefined) {
    if (prefixLength > 128) return undefined;
    return { family: 'v6', text: `${v6}/${prefixLength}`, loopback: v6 === '::1', prefixLength };
  }
  return undefined;
}
