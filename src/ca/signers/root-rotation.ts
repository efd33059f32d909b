/**
 * The self-signed CA's root rotation, as three steps on the stored CA (istio-ca-secret), each
 * safe to stop after and each picked up by every CA replica's poll without a restart:
 *
 *   prepare   a new root is made and trusted (root-cert.pem: old + new); the old one still signs.
 *   activate  the new root signs (ca-cert.pem/ca-key.pem); both stay trusted.
 *   finish    the old root is dropped (root-cert.pem: the signing root alone).
 *
 * Between the steps, brokers take the roots from the CA's answers: after `prepare`, every
 * consumer gets a bundle with both roots before any leaf under the new root exists (wait for it:
 * docs/operations.md); after `finish`, brokers re-issue the leaves still under the old root
 * before they drop it. Istio's self-signed rotator re-signs the root with the same key when its
 * remaining lifetime is short; this rotation also replaces the key. `rollback` undoes `prepare`
 * (drops the prepared root); after `activate` the old key is gone, so the way back is forward.
 *
 * Pure apart from making the new root (pki's `createRootCa`): the caller reads the Secret,
 * applies a step and writes it back with a resourceVersion check (the one writer wins).
 */
import { createRootCa, exportPkcs8Pem, parseCertificates, pemEncode, x509 } from '../../pki/index.js';
import { CaError } from '../errors.js';
import type { StoredCa } from './ca-secret-store.js';

export const ROTATION_STEPS = ['prepare', 'activate', 'finish', 'rollback'] as const;
export type RotationStep = (typeof ROTATION_STEPS)[number];

export interface NewRootOptions {
  readonly trustDomain: string;
  readonly keyType: 'ec' | 'rsa';
  readonly rootTtlSeconds: number;
  readonly nowMs: number;
}

/** Where a stored CA stands in a rotation. */
export type RotationPhase = 'single' | 'prepared' | 'overlap';

/** The roots a stored CA trusts, DER, signing root included. */
function trustedRootsDer(stored: StoredCa): Buffer[] {
  const signing = derOf(stored.certPem)[0];
  const roots = stored.rootsPem !== undefined ? derOf(stored.rootsPem) : [];
  const out = roots.length > 0 ? roots : signing ? [signing] : [];
  return out;
}

/** single: one root; prepared: a next root waits to sign; overlap: several roots trusted, none waiting. */
export function rotationPhase(stored: StoredCa): RotationPhase {
  if (stored.next) return 'prepared';
  return trustedRootsDer(stored).length > 1 ? 'overlap' : 'single';
}

/** The stored CA after `step`; ERR_CA_ROTATION_STEP when the step does not apply to its phase. */
export async function applyRotationStep(stored: StoredCa, step: RotationStep, options: NewRootOptions): Promise<StoredCa> {
  const phase = rotationPhase(stored);
  const refuse = (why: string) => new CaError('ERR_CA_ROTATION_STEP', `rotate-root ${step}: ${why} (the stored CA is ${phase})`, { status: 'failed-precondition' });
  const base = { ...(stored.resourceVersion !== undefined ? { resourceVersion: stored.resourceVersion } : {}) };
  const signingDer = derOf(stored.certPem)[0]!;
  switch (step) {
    case 'prepare': {
      if (phase !== 'single') throw refuse('a rotation is already under way; finish or roll it back first');
      const root = await createRootCa({
        subject: `O=${options.trustDomain}`,
        ttlSeconds: options.rootTtlSeconds,
        keySpec: options.keyType === 'rsa' ? { kind: 'rsa', bits: 2048 } : { kind: 'ec', curve: 'P-256' },
        nowMs: options.nowMs,
      });
      return { ...base, certPem: stored.certPem, keyPem: stored.keyPem, rootsPem: pemOf([signingDer, root.der]), next: { certPem: root.pem, keyPem: exportPkcs8Pem(root.privateKey) } };
    }
    case 'activate': {
      if (!stored.next) throw refuse('no prepared root to switch to; run prepare first');
      return { ...base, certPem: stored.next.certPem, keyPem: stored.next.keyPem, rootsPem: pemOf(trustedRootsDer(stored)) };
    }
    case 'finish': {
      if (phase !== 'overlap') throw refuse(phase === 'prepared' ? 'the prepared root does not sign yet; run activate first' : 'only one root is trusted, nothing to drop');
      return { ...base, certPem: stored.certPem, keyPem: stored.keyPem, rootsPem: pemOf([signingDer]) };
    }
    case 'rollback': {
      if (phase === 'prepared') return { ...base, certPem: stored.certPem, keyPem: stored.keyPem, rootsPem: pemOf([signingDer]) };
      throw refuse(phase === 'overlap' ? 'the new root signs already: roll forward (finish) or restore the old root from your backup' : 'no rotation under way');
    }
    default: {
      const unknown: never = step;
      throw refuse(`unknown step ${String(unknown)}`);
    }
  }
}

/** Loggable facts about a stored CA: phase, signing root and trusted roots (subject, serial, notAfter); no key. */
export function describeStoredCa(stored: StoredCa): Record<string, unknown> {
  const facts = (der: Buffer) => {
    const c = new x509.X509Certificate(new Uint8Array(der));
    return { subject: c.subject, serial: c.serialNumber, notAfter: c.notAfter.toISOString() };
  };
  return {
    phase: rotationPhase(stored),
    signing: facts(derOf(stored.certPem)[0]!),
    trusted: trustedRootsDer(stored).map(facts),
    ...(stored.next ? { next: facts(derOf(stored.next.certPem)[0]!) } : {}),
  };
}

function derOf(pem: string): Buffer[] {
  return parseCertificates(pem, 'stored CA certificate').map((c) => Buffer.from(c.rawData));
}

function pemOf(ders: readonly Buffer[]): string {
  const seen = new Set<string>();
  return ders
    .filter((d) => !seen.has(d.toString('base64')) && seen.add(d.toString('base64')))
    .map((d) => pemEncode('CERTIFICATE', d))
    .join('');
}
