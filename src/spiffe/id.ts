/**
 * SPIFFE IDs as the SPIFFE ID specification defines them:
 * `spiffe://<trust-domain><path>` where the trust domain uses lowercase letters, digits, `.`,
 * `-` and `_`, and the optional path is a sequence of `/segment`s made of letters, digits,
 * `.`, `-`, `_` (no empty, `.` or `..` segment, no trailing slash). No query, fragment, port or
 * userinfo; at most 2048 bytes in all, trust domain at most 255 characters.
 */
import { SpiffeError } from './errors.js';

export const SPIFFE_SCHEME_PREFIX = 'spiffe://';
export const SPIFFE_ID_MAX_LENGTH = 2048;
export const TRUST_DOMAIN_MAX_LENGTH = 255;

/** A parsed, valid SPIFFE ID. `path` is '' or starts with '/'. */
export interface SpiffeId {
  readonly trustDomain: string;
  readonly path: string;
  /** The canonical string form, `spiffe://trustDomain/path`. */
  readonly id: string;
}

function isTrustDomainChar(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x2d || c === 0x5f;
}

function isPathChar(c: number): boolean {
  return (
    (c >= 0x61 && c <= 0x7a) ||
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x30 && c <= 0x39) ||
    c === 0x2e ||
    c === 0x2d ||
    c === 0x5f
  );
}

/** Throws a coded SpiffeError when `td` is not a valid trust domain name. */
export function validateTrustDomain(td: string): void {
  if (td === '') throw new SpiffeError('ERR_SPIFFE_ID_TRUST_DOMAIN_MISSING', 'trust domain is missing');
  if (td.length > TRUST_DOMAIN_MAX_LENGTH) {
    throw new SpiffeError('ERR_SPIFFE_ID_TRUST_DOMAIN_TOO_LONG', `trust domain is longer than ${TRUST_DOMAIN_MAX_LENGTH} characters`);
  }
  for (let i = 0; i < td.length; i++) {
    const c = td.charCodeAt(i);
    if (isTrustDomainChar(c)) continue;
    if (c === 0x40) throw new SpiffeError('ERR_SPIFFE_ID_USERINFO', 'SPIFFE ID must not contain userinfo');
    if (c === 0x3a) throw new SpiffeError('ERR_SPIFFE_ID_PORT', 'SPIFFE ID must not contain a port');
    throw new SpiffeError(
      'ERR_SPIFFE_ID_TRUST_DOMAIN_CHAR',
      `trust domain has an invalid character ${JSON.stringify(td[i])} (allowed: a-z 0-9 . - _)`,
    );
  }
}

/** Throws a coded SpiffeError when `path` ('' or '/seg/seg') is not a valid SPIFFE ID path. */
export function validatePath(path: string): void {
  if (path === '') return;
  if (path.charCodeAt(0) !== 0x2f) throw new SpiffeError('ERR_SPIFFE_ID_PATH_CHAR', 'path must start with "/"');
  let segStart = 1;
  for (let i = 1; i <= path.length; i++) {
    const c = i < path.length ? path.charCodeAt(i) : 0x2f;
    if (c === 0x2f) {
      const seg = path.slice(segStart, i);
      if (seg === '') {
        if (i === path.length) throw new SpiffeError('ERR_SPIFFE_ID_TRAILING_SLASH', 'path must not end with "/"');
        throw new SpiffeError('ERR_SPIFFE_ID_PATH_EMPTY_SEGMENT', 'path must not contain an empty segment');
      }
      if (seg === '.' || seg === '..') {
        throw new SpiffeError('ERR_SPIFFE_ID_PATH_DOT_SEGMENT', 'path must not contain "." or ".." segments');
      }
      segStart = i + 1;
      continue;
    }
    if (isPathChar(c)) continue;
    if (c === 0x3f) throw new SpiffeError('ERR_SPIFFE_ID_QUERY', 'SPIFFE ID must not contain a query');
    if (c === 0x23) throw new SpiffeError('ERR_SPIFFE_ID_FRAGMENT', 'SPIFFE ID must not contain a fragment');
    throw new SpiffeError(
      'ERR_SPIFFE_ID_PATH_CHAR',
      `path has an invalid character ${JSON.stringify(path[i])} (allowed: A-Z a-z 0-9 . - _)`,
    );
  }
}

/** Parses and validates a SPIFFE ID string; throws a coded SpiffeError on any violation. */
export function parseSpiffeId(input: string): SpiffeId {
  if (typeof input !== 'string' || input === '') throw new SpiffeError('ERR_SPIFFE_ID_EMPTY', 'SPIFFE ID is empty');
  if (Buffer.byteLength(input, 'utf8') > SPIFFE_ID_MAX_LENGTH) {
    throw new SpiffeError('ERR_SPIFFE_ID_TOO_LONG', `SPIFFE ID is longer than ${SPIFFE_ID_MAX_LENGTH} bytes`);
  }
  if (!input.startsWith(SPIFFE_SCHEME_PREFIX)) {
    throw new SpiffeError('ERR_SPIFFE_ID_SCHEME', 'SPIFFE ID must start with "spiffe://" (lowercase scheme)');
  }
  const rest = input.slice(SPIFFE_SCHEME_PREFIX.length);
  let tdEnd = rest.length;
  for (let i = 0; i < rest.length; i++) {
    const c = rest.charCodeAt(i);
    if (c === 0x2f || c === 0x3f || c === 0x23) {
      tdEnd = i;
      break;
    }
  }
  const trustDomain = rest.slice(0, tdEnd);
  validateTrustDomain(trustDomain);
  const tail = rest.slice(tdEnd);
  if (tail.startsWith('?')) throw new SpiffeError('ERR_SPIFFE_ID_QUERY', 'SPIFFE ID must not contain a query');
  if (tail.startsWith('#')) throw new SpiffeError('ERR_SPIFFE_ID_FRAGMENT', 'SPIFFE ID must not contain a fragment');
  validatePath(tail);
  return { trustDomain, path: tail, id: input };
}

/** Builds a SPIFFE ID from a trust domain and path segments (each segment validated). */
export function formatSpiffeId(trustDomain: string, ...segments: readonly string[]): SpiffeId {
  validateTrustDomain(trustDomain);
  for (const seg of segments) {
    if (seg === '') throw new SpiffeError('ERR_SPIFFE_ID_PATH_EMPTY_SEGMENT', 'path must not contain an empty segment');
    if (seg.includes('/')) throw new SpiffeError('ERR_SPIFFE_ID_PATH_CHAR', 'a path segment must not contain "/"');
  }
  const path = segments.map((s) => `/${s}`).join('');
  validatePath(path);
  const id = `${SPIFFE_SCHEME_PREFIX}${trustDomain}${path}`;
  if (Buffer.byteLength(id, 'utf8') > SPIFFE_ID_MAX_LENGTH) {
    throw new SpiffeError('ERR_SPIFFE_ID_TOO_LONG', `SPIFFE ID is longer than ${SPIFFE_ID_MAX_LENGTH} bytes`);
  }
  return { trustDomain, path, id };
}

/** True when `input` is a valid SPIFFE ID. */
export function isSpiffeId(input: string): boolean {
  try {
    parseSpiffeId(input);
    return true;
  } catch {
    return false;
  }
}
