/**
 * Raw pieces of a certificate read with the minimal DER reader: the exact TBSCertificate,
 * issuer and subject bytes (re-encoding a Name can change it; these are what signatures and
 * issuer matching use), and the SPKI.
 */
import { createHash } from 'node:crypto';
import { expectTlv, readTlv, TAG_BIT_STRING, TAG_INTEGER, TAG_SEQUENCE } from './der.js';
import { PkiError } from './errors.js';

export interface CertificateFields {
  readonly tbs: Buffer;
  readonly serial: Buffer;
  readonly issuerDer: Buffer;
  readonly subjectDer: Buffer;
  readonly spki: Buffer;
}

export function certificateFields(der: Uint8Array): CertificateFields {
  const buf = Buffer.from(der.buffer, der.byteOffset, der.byteLength);
  try {
    const outer = expectTlv(buf, 0, buf.length, TAG_SEQUENCE, 'Certificate');
    const tbs = expectTlv(buf, outer.contentStart, outer.end, TAG_SEQUENCE, 'TBSCertificate');
    let p = tbs.contentStart;
    const first = readTlv(buf, p, tbs.end);
    if (first.tag === 0xa0) p = first.end;
    const serial = expectTlv(buf, p, tbs.end, TAG_INTEGER, 'serialNumber');
    const sigAlg = expectTlv(buf, serial.end, tbs.end, TAG_SEQUENCE, 'signature');
    const issuer = expectTlv(buf, sigAlg.end, tbs.end, TAG_SEQUENCE, 'issuer');
    const validity = expectTlv(buf, issuer.end, tbs.end, TAG_SEQUENCE, 'validity');
    const subject = expectTlv(buf, validity.end, tbs.end, TAG_SEQUENCE, 'subject');
    const spki = expectTlv(buf, subject.end, tbs.end, TAG_SEQUENCE, 'subjectPublicKeyInfo');
    return {
      tbs: buf.subarray(tbs.start, tbs.end),
      serial: buf.subarray(serial.contentStart, serial.end),
      issuerDer: buf.subarray(issuer.start, issuer.end),
      subjectDer: buf.subarray(subject.start, subject.end),
      spki: buf.subarray(spki.start, spki.end),
    };
  } catch (err) {
    throw new PkiError('ERR_PKI_CERT_INVALID', `certificate structure: ${err instanceof Error ? err.message : 'unreadable'}`, err);
  }
}

/** RFC 5280 method 1 key identifier (SHA-1 of the subjectPublicKey bits), as Go computes it. */
export function keyIdentifier(spki: Uint8Array): Buffer {
  const buf = Buffer.from(spki);
  const seq = expectTlv(buf, 0, buf.length, TAG_SEQUENCE, 'SubjectPublicKeyInfo');
  const alg = expectTlv(buf, seq.contentStart, seq.end, TAG_SEQUENCE, 'algorithm');
  const bits = expectTlv(buf, alg.end, seq.end, TAG_BIT_STRING, 'subjectPublicKey');
  return createHash('sha1').update(buf.subarray(bits.contentStart + 1, bits.end)).digest();
}
