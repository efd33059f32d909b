/**
 * Small certificate readers the broker, its client and the CA client share: the URI SANs of a
 * certificate, and the split of a concatenated DER certificate sequence (the Broker API's chain
 * and bundle fields).
 */
import type { X509Certificate } from 'node:crypto';
import { readTlv, TAG_SEQUENCE } from './der.js';
import { canonicalServingName, servingNameKind } from './serving-names.js';

/** The URI subject alternative names of `cert`, in order. */
export function uriSans(cert: X509Certificate): string[] {
  return (cert.subjectAltName ?? '')
    .split(', ')
    .filter((s) => s.startsWith('URI:'))
    .map((s) => s.slice(4));
}

/**
 * The DNS and IP subject alternative names of `cert` in the form serving names are compared in
 * (`canonicalServingName`: DNS lowercased, IPs by address).
 */
export function servingNameSans(cert: X509Certificate): string[] {
  return (cert.subjectAltName ?? '')
    .split(', ')
    .flatMap((s) => (s.startsWith('DNS:') ? [s.slice(4)] : s.startsWith('IP Address:') ? [s.slice('IP Address:'.length)] : []))
    .filter((n) => servingNameKind(n) !== undefined)
    .map(canonicalServingName);
}

/** The names of `names` that `cert` does not carry as a DNS or IP SAN (compared canonically). */
export function missingServingNames(cert: X509Certificate, names: readonly string[]): string[] {
  const held = new Set(servingNameSans(cert));
  return names.filter((n) => !held.has(canonicalServingName(n)));
}

/** Splits a concatenated DER sequence of certificates (the Broker API chain/bundle fields). */
export function splitDerCertificates(buf: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let off = 0; off < buf.length; ) {
    if (buf[off] !== TAG_SEQUENCE) throw new Error('not a DER certificate sequence');
    const { end } = readTlv(buf, off);
    out.push(buf.subarray(off, end));
    off = end;
  }
  return out;
}
