/**
 * istiod's leaf profile (docs/design.md "Certificate profile", Istio's generate_cert.go on Go's
 * crypto/x509): empty subject; extensions in Go's order — keyUsage (critical,
 * digitalSignature + keyEncipherment), extKeyUsage (serverAuth, clientAuth), basicConstraints
 * (critical, cA false: Go always marks it critical), authorityKeyIdentifier (the signer's
 * SKI, when it has one), subjectAltName (critical because the subject is empty, one URI);
 * 128-bit random positive serial; notBefore = now - 2 min; notAfter = min(now + ttl, signer
 * notAfter); whole seconds.
 *
 * This file holds the numbers and the per-request plan (serial, validity); the two builders
 * (leaf-template.ts fast, leaf-reference.ts @peculiar/x509) both take a plan.
 */
import { randomFillSync } from 'node:crypto';
import { positiveIntegerContent } from './der.js';
import { PkiError } from './errors.js';

export const LEAF_BACKDATE_MS = 2 * 60 * 1000;
export const MAX_LEAF_TTL_SECONDS = 90 * 24 * 60 * 60;
export const SERIAL_BITS = 128;

/** Raw bytes of a keyUsage BIT STRING value for digitalSignature|keyEncipherment (Go trims to 05 a0). */
export const LEAF_KEY_USAGE_VALUE = Buffer.from('030205a0', 'hex');
/** extKeyUsage value: SEQUENCE { serverAuth, clientAuth }. */
export const LEAF_EXT_KEY_USAGE_VALUE = Buffer.from('301406082b0601050507030106082b06010505070302', 'hex');
/** basicConstraints value for a leaf: empty SEQUENCE (cA defaults to false). */
export const LEAF_BASIC_CONSTRAINTS_VALUE = Buffer.from('3000', 'hex');

export type RandomBytes = (n: number) => Buffer;

export interface LeafPlanInput {
  readonly nowMs: number;
  readonly ttlSeconds: number;
  readonly signerNotAfterMs: number;
  /** Upper bound on ttlSeconds (over it is ERR_PKI_TTL_TOO_LONG, not clamped). */
  readonly maxTtlSeconds?: number;
  readonly randomBytes?: RandomBytes;
}

/** The varying, non-key fields of one leaf. */
export interface LeafPlan {
  /** INTEGER content octets (minimal, positive). */
  readonly serial: Buffer;
  readonly notBeforeMs: number;
  readonly notAfterMs: number;
}

const POOL_SIZE = 4096;
let pool = Buffer.alloc(0);
let poolAt = 0;

/**
 * CSPRNG bytes drawn from a 4 KiB block refilled with randomFillSync (one OpenSSL call per
 * 256 serials instead of one each). The returned view is only valid until the next call.
 */
export function pooledRandomBytes(n: number): Buffer {
  if (n > POOL_SIZE) return randomFillSync(Buffer.alloc(n));
  if (poolAt + n > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(POOL_SIZE));
    poolAt = 0;
  }
  const out = pool.subarray(poolAt, poolAt + n);
  poolAt += n;
  return out;
}

/** A 128-bit random positive serial as INTEGER content octets (never zero). */
export function randomSerial(randomBytes: RandomBytes = pooledRandomBytes): Buffer {
  for (;;) {
    const raw = randomBytes(SERIAL_BITS / 8);
    if (raw.some((b) => b !== 0)) return positiveIntegerContent(raw);
  }
}

/** Lowercase hex of a serial's INTEGER content without a sign-padding zero. */
export function serialHex(serial: Uint8Array): string {
  const b = Buffer.isBuffer(serial) ? serial : Buffer.from(serial.buffer, serial.byteOffset, serial.byteLength);
  return b.toString('hex', b.length > 1 && b[0] === 0 ? 1 : 0);
}

export function planLeaf(input: LeafPlanInput): LeafPlan {
  const { ttlSeconds, nowMs } = input;
  if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds <= 0) {
    throw new PkiError('ERR_PKI_TTL_INVALID', `TTL must be a positive whole number of seconds, got ${String(ttlSeconds)}`);
  }
  const max = input.maxTtlSeconds ?? MAX_LEAF_TTL_SECONDS;
  if (ttlSeconds > max) throw new PkiError('ERR_PKI_TTL_TOO_LONG', `TTL ${ttlSeconds}s is over the maximum ${max}s`);
  const nowSec = Math.floor(nowMs / 1000) * 1000;
  if (input.signerNotAfterMs <= nowMs) throw new PkiError('ERR_PKI_SIGNER_EXPIRED', 'signing certificate has expired');
  const notBeforeMs = nowSec - LEAF_BACKDATE_MS;
  const notAfterMs = Math.floor(Math.min(nowSec + ttlSeconds * 1000, input.signerNotAfterMs) / 1000) * 1000;
  return { serial: randomSerial(input.randomBytes), notBeforeMs, notAfterMs };
}
