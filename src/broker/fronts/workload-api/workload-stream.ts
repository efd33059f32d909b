/**
 * One Workload API stream (FetchX509SVID or FetchX509Bundles) for an attested caller: the full
 * state as soon as it is there, then again after every rotation or bundle change (each stream
 * after its own random share of the update window, so one change does not reach every workload at
 * once), every message preceded by the caller's re-check (same process, same pod, same identity).
 * It ends with PERMISSION_DENIED when the caller stops having an identity (the pod leaves or is no
 * longer entitled, the process exits or moves) and with UNAVAILABLE at shutdown.
 */
import type { ServerWritableStream } from '@grpc/grpc-js';
import { describeError } from '../../../core/errors.js';
import type { Logger } from '../../../core/log.js';
import type { X509BundlesResponse, X509SVIDResponse } from '../../../protocol/workload-api.js';
import { firstCertificate, heldSends, pacedUpdates, sendableCert, svidMaterial, type PodGoneReason, type TrustBundle, type WorkloadCert } from '../../cache/index.js';
import { x509BundlesResponse as bundlesMessage, x509SvidResponse as svidMessage } from '../../../protocol/spiffe-x509.js';
import { shuttingDown } from '../../errors.js';
import type { WorkloadApiOptions } from './workload-api.js';
import { notAttested, stillCaller, type WorkloadCaller } from './workload-caller.js';

export type WorkloadRpc = 'x509svid' | 'x509bundles';
export type WorkloadResponse = X509SVIDResponse | X509BundlesResponse;

/** The X509SVIDResponse for `cert`: one SVID (chain leaf first, PKCS#8 key, the trust domain's roots), no CRL, no federation. */
export function x509SvidResponse(cert: WorkloadCert, bundle: TrustBundle): X509SVIDResponse {
  return svidMessage(svidMaterial(cert, bundle));
}

/** The X509BundlesResponse: the trust domain's roots keyed by its SPIFFE ID. */
export function x509BundlesResponse(bundle: TrustBundle): X509BundlesResponse {
  return bundlesMessage(bundle.trustDomain, bundle.concatenatedDer);
}

/** What a stream is handed: the service's options (its observer aside) and the service's callbacks. */
export interface WorkloadStreamDeps extends Omit<WorkloadApiOptions, 'observer'> {
  /** Ends the stream with `err` as the caller's status (through the service's one error mapping). */
  readonly reject: (err: unknown) => void;
  readonly sent: (first: boolean) => void;
  readonly closed: () => void;
}

export class WorkloadStream {
  readonly #rpc: WorkloadRpc;
  readonly #call: ServerWritableStream<unknown, WorkloadResponse>;
  readonly #d: WorkloadStreamDeps;
  readonly #log: Logger;
  readonly #ac = new AbortController();
  readonly #cleanups: Array<() => void> = [];
  #caller: WorkloadCaller;
  #finished = false;
  #firstSent = false;
  /** The first message was due but its leaf was withheld: the next change sends it. */
  #firstWithheld = false;
  readonly #paced: () => void;
  readonly #hold: (ms: number) => void;

  constructor(rpc: WorkloadRpc, call: ServerWritableStream<unknown, WorkloadResponse>, caller: WorkloadCaller, deps: WorkloadStreamDeps) {
    this.#rpc = rpc;
    this.#call = call;
    this.#caller = caller;
    this.#d = deps;
    const { pod, process } = caller;
    this.#paced = pacedUpdates({ clock: deps.clock, rng: deps.rng, windowMs: deps.updateJitterMs, signal: this.#ac.signal }, () => this.#send(!this.#firstSent));
    this.#hold = heldSends(deps.clock, this.#ac.signal, () => this.#scheduleUpdate());
    this.#log = deps.logger.child({ rpc, pod: `${pod.namespace}/${pod.name}`, uid: pod.uid, pid: process.pid, identity: pod.identity });
  }

  /** Ends the stream from the server side (shutdown). */
  close(): void {
    this.#finish(shuttingDown());
  }

  start(): void {
    const { pods, certs, bundle } = this.#d;
    const { pod } = this.#caller;
    this.#call.on('cancelled', () => this.#teardown());
    this.#cleanups.push(
      pods.onGone(pod.uid, (reason: PodGoneReason) => {
        this.#log.info('workload pod left or lost its identity; ending stream', { reason });
        this.#finish(notAttested(reason === 'deleted' || reason === 'replaced' ? 'pod-not-on-node' : reason, `pod ${pod.namespace}/${pod.name} ${reason}`));
      }),
      bundle.onChange(() => this.#scheduleUpdate()),
    );
    if (this.#finished) return; // the pod was already gone
    if (this.#rpc === 'x509bundles') {
      this.#send(true);
      return;
    }
    this.#cleanups.push(
      certs.subscribe(pod.identity, (ev) => {
        if (ev.type === 'updated') this.#scheduleUpdate();
        else this.#finish(notAttested('pod-not-on-node', `identity ${pod.identity} is no longer held`));
      }),
    );
    if (certs.current(pod.identity)) this.#send(true);
    // A certificate not there yet (a new pod, a failing CA): the stream waits, the manager retries.
    else void firstCertificate(certs, pod.identity, { signal: this.#ac.signal, log: this.#log, send: () => this.#send(true), fail: (err) => this.#finish(err) });
  }

  #current(): WorkloadResponse | undefined {
    if (this.#rpc === 'x509bundles') return x509BundlesResponse(this.#d.bundle);
    // Never a leaf whose chain the bundle sent with it does not verify (withheld until the next
    // change), nor one under a root the node's other streams may not have yet (held).
    const sendable = sendableCert(this.#d.certs, this.#d.bundle, this.#caller.pod.identity, this.#d.clock.now());
    if (sendable && 'holdMs' in sendable) {
      this.#firstWithheld ||= !this.#firstSent;
      this.#hold(sendable.holdMs);
    }
    return sendable && 'cert' in sendable ? x509SvidResponse(sendable.cert, this.#d.bundle) : undefined;
  }

  /** Re-checks the caller, then writes the full state. */
  #send(first: boolean): void {
    if (this.#finished || (first && this.#firstSent)) return;
    try {
      this.#caller = stillCaller(this.#caller, this.#d.callers, this.#d.pods);
    } catch (err) {
      this.#log.warn('caller re-check failed; ending stream', { err: describeError(err) });
      this.#finish(err);
      return;
    }
    const msg = this.#current();
    if (msg === undefined) {
      if (first) this.#firstWithheld = true;
      return;
    }
    this.#call.write(msg);
    this.#firstSent = true;
    this.#d.sent(first);
  }

  /** One pending update at a time, after a random share of the window; it sends whatever is current then. */
  #scheduleUpdate(): void {
    if (!this.#finished && (this.#firstSent || this.#firstWithheld)) this.#paced();
  }

  #teardown(): boolean {
    if (this.#finished) return false;
    this.#finished = true;
    this.#ac.abort();
    for (const c of this.#cleanups) c();
    this.#d.closed();
    return true;
  }

  #finish(err?: unknown): void {
    if (!this.#teardown()) return;
    if (err === undefined) this.#call.end();
    else this.#d.reject(err);
  }
}
