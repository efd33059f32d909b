/**
 * PEM <-> DER. `parsePem` reads every `-----BEGIN X-----` block of a text (text between
 * blocks is ignored, as openssl does) and fails with a coded error on an unterminated block,
 * mismatched labels, encapsulated headers (encrypted keys) or bad base64.
 */
import { PkiError } from './errors.js';

export interface PemBlock {
  /** The label, e.g. 'CERTIFICATE', 'CERTIFICATE REQUEST', 'PRIVATE KEY'. */
  readonly type: string;
  readonly der: Buffer;
}

const BEGIN = /-----BEGIN ([A-Z0-9 ]+)-----/g;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function parsePem(text: string | Uint8Array): PemBlock[] {
  const s = typeof text === 'string' ? text : Buffer.from(text).toString('latin1');
  const blocks: PemBlock[] = [];
  BEGIN.lastIndex = 0;
  for (let m = BEGIN.exec(s); m !== null; m = BEGIN.exec(s)) {
    const type = m[1]!;
    const bodyStart = m.index + m[0].length;
    const endMarker = `-----END ${type}-----`;
    const endAt = s.indexOf('-----END ', bodyStart);
    if (endAt < 0) throw new PkiError('ERR_PKI_PEM_INVALID', `PEM block ${type} has no END line`);
    if (!s.startsWith(endMarker, endAt)) {
      throw new PkiError('ERR_PKI_PEM_INVALID', `PEM block BEGIN ${type} ends with a different END label`);
    }
    const body = s.slice(bodyStart, endAt);
    if (body.includes(':')) {
      throw new PkiError('ERR_PKI_KEY_ENCRYPTED', `PEM block ${type} has headers (encrypted PEM is not supported)`);
    }
    const b64 = body.replace(/[\r\n\t ]+/g, '');
    if (b64 === '' || b64.length % 4 !== 0 || !BASE64.test(b64)) {
      throw new PkiError('ERR_PKI_PEM_INVALID', `PEM block ${type} has invalid base64`);
    }
    blocks.push({ type, der: Buffer.from(b64, 'base64') });
    BEGIN.lastIndex = endAt + endMarker.length;
  }
  return blocks;
}

/** All blocks, which must be non-empty and all of `type`. */
export function parsePemBlocksOfType(text: string | Uint8Array, type: string, what = type): Buffer[] {
  const blocks = parsePem(text);
  if (blocks.length === 0) throw new PkiError('ERR_PKI_PEM_EMPTY', `no PEM ${what} found`);
  for (const b of blocks) {
    if (b.type !== type) throw new PkiError('ERR_PKI_PEM_TYPE', `expected PEM ${type}, found ${b.type}`);
  }
  return blocks.map((b) => b.der);
}

/** Exactly one block of one of `types`. */
export function parsePemOne(text: string | Uint8Array, types: readonly string[]): PemBlock {
  const blocks = parsePem(text);
  if (blocks.length === 0) throw new PkiError('ERR_PKI_PEM_EMPTY', `no PEM block found (want ${types.join(' or ')})`);
  if (blocks.length > 1) throw new PkiError('ERR_PKI_PEM_INVALID', `expected one PEM block, found ${blocks.length}`);
  const b = blocks[0]!;
  if (!types.includes(b.type)) {
    throw new PkiError('ERR_PKI_PEM_TYPE', `expected PEM ${types.join(' or ')}, found ${b.type}`);
  }
  return b;
}

/** DER -> PEM with 64-character lines and a trailing newline. */
export function pemEncode(type: string, der: Uint8Array): string {
  const b64 = Buffer.from(der.buffer, der.byteOffset, der.byteLength).toString('base64');
  let out = `-----BEGIN ${type}-----\n`;
  for (let i = 0; i < b64.length; i += 64) out += b64.slice(i, i + 64) + '\n';
  return out + `-----END ${type}-----\n`;
}

export const certificateToPem = (der: Uint8Array): string => pemEncode('CERTIFICATE', der);
