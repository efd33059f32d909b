/**
 * The `outcome` label of a server's per-call metrics, one mapping for every server that counts
 * its calls (the CA's `certbroker_ca_requests_total`, the broker's Istio CA front's
 * `certbroker_broker_istio_ca_front_requests_total`), so the same gRPC status is the same label
 * value everywhere: a refused caller is `denied`, a bad request `invalid`, a caller over its
 * limits `limited`, a backend that did not answer or answered too late `unavailable`, anything
 * else (an unexpected error included) `error`. docs/operations.md lists it (*Call outcomes*).
 */
import { CertbrokerError, type ErrorStatus } from '../core/errors.js';

export type CallOutcome = 'issued' | 'denied' | 'invalid' | 'limited' | 'unavailable' | 'error';

/** Every status, so a new one cannot be added without choosing its outcome. */
const OUTCOME: Readonly<Record<ErrorStatus, Exclude<CallOutcome, 'issued'>>> = {
  unauthenticated: 'denied',
  'permission-denied': 'denied',
  'invalid-argument': 'invalid',
  'resource-exhausted': 'limited',
  unavailable: 'unavailable',
  'deadline-exceeded': 'unavailable',
  'not-found': 'error',
  'already-exists': 'error',
  'failed-precondition': 'error',
  unimplemented: 'error',
  cancelled: 'error',
  internal: 'error',
};

/** The outcome of a call that failed with `err`. */
export function callOutcome(err: unknown): Exclude<CallOutcome, 'issued'> {
  return err instanceof CertbrokerError ? OUTCOME[err.status] : 'error';
}
