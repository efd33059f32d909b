/**
 * `certbroker ca rotate-root <step>`: one step of the self-signed CA's root rotation
 * (signers/root-rotation.ts) on the stored CA — read the Secret, apply the step, write it back
 * only if nobody wrote in between (resourceVersion; a conflict is ERR_CA_ROTATION_STEP, run the
 * step again after looking at the new state). Every CA replica installs the result at its next
 * poll of the Secret; nothing restarts. Returns what the Secret holds now (no key).
 */
import { CaError } from './errors.js';
import type { CaSecretStore } from './signers/ca-secret-store.js';
import { applyRotationStep, describeStoredCa, type NewRootOptions, type RotationStep } from './signers/root-rotation.js';

export async function rotateStoredRoot(store: CaSecretStore, step: RotationStep | 'status', options: NewRootOptions, signal?: AbortSignal): Promise<Record<string, unknown>> {
  const stored = await store.read(signal);
  if (!stored) throw new CaError('ERR_CA_ROTATION_STEP', `rotate-root ${step}: ${store.location} does not exist (the CA creates it on first start)`, { status: 'failed-precondition' });
  if (step === 'status') return describeStoredCa(stored);
  const next = await applyRotationStep(stored, step, options);
  if (!store.replace) throw new CaError('ERR_CA_ROTATION_STEP', `rotate-root ${step}: ${store.location} cannot be written`, { status: 'failed-precondition' });
  const outcome = await store.replace(next, signal);
  if (outcome === 'conflict') {
    throw new CaError('ERR_CA_ROTATION_STEP', `rotate-root ${step}: ${store.location} changed while the step ran; nothing written — check 'rotate-root status' and run it again`, {
      status: 'failed-precondition',
    });
  }
  return describeStoredCa(next);
}
