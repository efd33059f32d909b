/**
 * What the certificate manager tells the rest of the broker. Listeners act on certificates
 * (`subscribe` for one identity's consumers, `subscribeAll` for what follows every certificate,
 * such as the trust bundle); observers only watch (metrics, logs) and nothing depends on them
 * being called. The manager calls every one of them guarded (listeners.ts): a throw is logged
 * and stops nothing.
 */
import type { FetchPriority } from './priority-queue.js';
import type { WorkloadCert } from './workload-cert.js';

export type CertEvent =
  | { readonly type: 'updated'; readonly cert: WorkloadCert }
  | { readonly type: 'forgotten' };

export type CertListener = (event: CertEvent) => void;

/** Called for every identity's events (`subscribeAll`). */
export type AllCertsListener = (identity: string, event: CertEvent) => void;

/** Hooks for metrics and logs; all optional. */
export interface CertManagerObserver {
  fetchStarted?(identity: string, priority: FetchPriority): void;
  fetchSucceeded?(identity: string, cert: WorkloadCert, durationMs: number): void;
  fetchFailed?(identity: string, err: unknown, durationMs: number, nextAttemptInMs: number): void;
  /** First certificate for an identity since it was first retained (registration -> ready). */
  firstReady?(identity: string, sinceRetainedMs: number): void;
  /** The certificate held reached its notAfter with no newer one: it was dropped (state `expired`). */
  expired?(identity: string, cert: WorkloadCert): void;
  forgotten?(identity: string): void;
}
