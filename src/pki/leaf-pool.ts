/**
 * `LeafIssuerPool`: the fast leaf path on N worker threads (default: one per core), so the
 * CA issues on every core while its own thread serves gRPC. Requests arriving in the same
 * event-loop turn travel together: each chunk of up to MAX_BATCH goes whole to the worker with
 * the fewest outstanding requests. (Balancing request by request instead split every turn's
 * requests over all workers, so batches shrank round trip after round trip to ~2 requests per
 * message and the main thread paid ~4× more per certificate.) Errors come back with their code as a PkiError/SpiffeError.
 * `setSigner` swaps the CA for every later request; `close({drainMs})` answers the requests
 * already taken before it terminates the workers. Idle workers are unref'd, so a pool never
 * keeps a process alive on its own.
 *
 * A worker that dies (uncaught error, process.exit, crash): every answer it sent before dying is
 * delivered, then each of its still-outstanding requests fails with ERR_PKI_POOL_WORKER. They are
 * not sent to another worker: one of them may be what killed it. The worker is replaced at once;
 * a slot whose workers die MAX_RESPAWNS + 1 times in a row without answering anything (e.g. a
 * worker that cannot even start) is given up instead of respawned in a loop. With every slot given
 * up, `issue` fails at once with ERR_PKI_POOL_WORKER (see `liveWorkers`). Deaths are logged.
 * `close()` works in any of these states.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { CertbrokerError } from '../core/errors.js';
import { createLogger, type Logger } from '../core/log.js';
import { SpiffeError, type SpiffeErrorCode } from '../spiffe/errors.js';
import { PkiError, type PkiErrorCode } from './errors.js';
import { parsePemOne } from './pem.js';
import { LeafTemplate, type IssuedLeaf, type LeafRequest, type LeafSigner } from './leaf-template.js';
import type { BatchMessage, ResultsMessage } from './leaf-pool-protocol.js';

export interface LeafIssuerPoolOptions {
  readonly signer: LeafSigner;
  /** Worker count; default os.availableParallelism(). */
  readonly size?: number;
  readonly maxTtlSeconds?: number;
  /** Where worker deaths are reported; default a stderr logger with `component: 'leaf-pool'`. */
  readonly logger?: Logger;
  /**
   * The worker module; default the real ./leaf-worker.js. Another module must speak
   * leaf-pool-protocol.ts. This is how tests make a worker really die: they pass a module that
   * loads the real worker and exits or throws on a marked request (or at start). That covers
   * every way a worker goes (error then exit, bare exit, death before the first message) with no
   * test-only branch in the production worker, which terminating a Worker from outside would not.
   */
  readonly workerModule?: URL;
  /** Called when a slot is given up (its workers kept dying), after `liveWorkers` dropped. */
  readonly onSlotGivenUp?: () => void;
}

interface Pending {
  readonly spiffeId: string;
  readonly resolve: (leaf: IssuedLeaf) => void;
  readonly reject: (err: Error) => void;
}

/** Requests waiting for the next flush, as the parallel arrays they travel in. */
interface Queued {
  readonly ids: number[];
  readonly csrs: (string | Uint8Array)[];
  readonly spiffeIds: string[];
  readonly ttlSeconds: number[];
}

interface Slot {
  readonly worker: Worker;
  readonly outstanding: Map<number, Pending>;
  /** Workers of this slot that died in a row, none of them answering anything, before this one. */
  readonly deathsInARow: number;
  /** This worker has sent at least one answer. */
  answered: boolean;
  /** The 'error' that is killing the worker, kept for the 'exit' that always follows it. */
  failure: string | undefined;
}

const emptyQueue = (): Queued => ({ ids: [], csrs: [], spiffeIds: [], ttlSeconds: [] });

/**
 * A leaf answered by a worker. The DER is decoded from the PEM on first use only: the CA needs
 * just the PEM, so the DER never crosses the thread boundary. `der` is an own enumerable getter,
 * so spreading or JSON-serialising the leaf still includes it.
 */
function pooledLeaf(msg: ResultsMessage, i: number, spiffeId: string): IssuedLeaf {
  const pem = msg.pems[i]!;
  let der: Uint8Array | undefined;
  return {
    pem,
    serialHex: msg.serials[i]!,
    notBeforeMs: msg.notBeforeMs[i]!,
    notAfterMs: msg.notAfterMs[i]!,
    spiffeId,
    get der(): Uint8Array {
      der ??= parsePemOne(pem, ['CERTIFICATE']).der;
      return der;
    },
  };
}

/** Largest batch per message: several queued messages keep a worker busy between round trips. */
const MAX_BATCH = 32;

/**
 * A slot whose worker dies is refilled at once, but only this many times in a row while none of
 * its workers answers anything; one more death and the slot is given up. A worker that cannot
 * start therefore costs 1 + MAX_RESPAWNS short-lived threads, not a respawn loop.
 */
const MAX_RESPAWNS = 3;

const DEFAULT_WORKER_MODULE = new URL('./leaf-worker.js', import.meta.url);

function errorFromCode(code: string, message: string): CertbrokerError {
  if (code.startsWith('ERR_SPIFFE') || code.startsWith('ERR_SVID')) return new SpiffeError(code as SpiffeErrorCode, message);
  if (code.startsWith('ERR_PKI')) return new PkiError(code as PkiErrorCode, message);
  return new PkiError('ERR_PKI_POOL_WORKER', message);
}

function noWorkersLeft(): PkiError {
  return new PkiError('ERR_PKI_POOL_WORKER', 'no leaf workers left: each one kept dying before it answered');
}

export class LeafIssuerPool {
  readonly size: number;
  readonly #slots: Slot[] = [];
  #signer: LeafSigner;
  readonly #maxTtlSeconds: number | undefined;
  readonly #log: Logger;
  readonly #workerModule: URL;
  readonly #onSlotGivenUp: (() => void) | undefined;
  #nextId = 1;
  /** Requests of this event-loop turn, not yet given to a worker. */
  #queued: Queued = emptyQueue();
  #queuedPending: Pending[] = [];
  #flushScheduled = false;
  /** No new requests (close() was called); answers to outstanding ones may still arrive. */
  #closed = false;
  /** Workers terminated (or being terminated): nothing more is sent or respawned. */
  #terminated = false;
  /** Resolved when the last outstanding request is answered (close with drainMs). */
  #idle: (() => void) | undefined;

  constructor(options: LeafIssuerPoolOptions) {
    new LeafTemplate(options.signer); // throws a coded error for an unusable signer, here, not in a worker
    this.size = Math.max(1, options.size ?? availableParallelism());
    this.#signer = options.signer;
    this.#maxTtlSeconds = options.maxTtlSeconds;
    this.#log = options.logger ?? createLogger({ fields: { component: 'leaf-pool' } });
    this.#workerModule = options.workerModule ?? DEFAULT_WORKER_MODULE;
    this.#onSlotGivenUp = options.onSlotGivenUp;
    for (let i = 0; i < this.size; i++) this.#slots.push(this.#spawn(0));
  }

  #spawn(deathsInARow: number): Slot {
    const worker = new Worker(this.#workerModule, {
      // Never inherit the parent's node flags (e.g. `--input-type=module -e`), which break the worker.
      execArgv: [],
    });
    const slot: Slot = { worker, outstanding: new Map(), deathsInARow, answered: false, failure: undefined };
    worker.postMessage({ kind: 'signer', signer: this.#signer, maxTtlSeconds: this.#maxTtlSeconds });
    worker.on('message', (msg: ResultsMessage) => {
      slot.answered = true;
      for (let i = 0; i < msg.ids.length; i++) {
        const p = slot.outstanding.get(msg.ids[i]!);
        if (!p) continue;
        slot.outstanding.delete(msg.ids[i]!);
        p.resolve(pooledLeaf(msg, i, p.spiffeId));
      }
      for (const f of msg.failed) {
        const p = slot.outstanding.get(f.id);
        if (!p) continue;
        slot.outstanding.delete(f.id);
        p.reject(errorFromCode(f.code, f.message));
      }
      if (slot.outstanding.size === 0) {
        worker.unref();
        if (this.#idle && this.pending === 0) this.#idle();
      }
    });
    // An uncaught error in the worker comes as 'error' then 'exit'; every other death as 'exit'
    // alone. Only 'exit' settles anything: by then every answer the worker sent has arrived.
    worker.on('error', (err) => {
      slot.failure = `failed: ${err instanceof Error ? err.message : String(err)}`;
    });
    worker.on('exit', (code) => {
      if (!this.#terminated) this.#replace(slot, slot.failure ?? `exited with code ${code}`);
    });
    worker.unref();
    return slot;
  }

  /** `slot`'s worker is dead: fail what it still held, then refill or give up the slot. */
  #replace(slot: Slot, reason: string): void {
    const failedRequests = slot.outstanding.size;
    for (const p of slot.outstanding.values()) p.reject(new PkiError('ERR_PKI_POOL_WORKER', `leaf worker ${reason}`));
    slot.outstanding.clear();
    const deathsInARow = slot.answered ? 1 : slot.deathsInARow + 1;
    const respawn = deathsInARow <= MAX_RESPAWNS;
    const idx = this.#slots.indexOf(slot);
    if (idx >= 0) {
      if (respawn) this.#slots[idx] = this.#spawn(deathsInARow);
      else this.#slots.splice(idx, 1);
    }
    const fields = { reason, failedRequests, deathsInARow, liveWorkers: this.#slots.length };
    if (respawn) this.#log.warn('leaf worker died; replaced', fields);
    else this.#log.error('leaf worker died repeatedly without answering; slot given up', fields);
    if (this.#idle && this.pending === 0) this.#idle();
    if (!respawn) {
      try {
        this.#onSlotGivenUp?.();
      } catch (err) {
        this.#log.error('onSlotGivenUp threw', { err: err instanceof Error ? err.message : String(err) });
      }
    }
  }

  /** Replaces the signing CA for all later requests (e.g. after a cacerts reload). */
  setSigner(signer: LeafSigner): void {
    new LeafTemplate(signer);
    this.#signer = signer;
    for (const s of this.#slots) s.worker.postMessage({ kind: 'signer', signer, maxTtlSeconds: this.#maxTtlSeconds });
  }

  /**
   * Workers serving requests: `size` until a slot is given up (its workers kept dying without
   * answering), 0 when the pool can no longer issue. A readiness probe can watch it.
   */
  get liveWorkers(): number {
    return this.#terminated ? 0 : this.#slots.length;
  }

  /** Requests not yet answered, over all workers. */
  get pending(): number {
    let n = this.#queuedPending.length;
    for (const s of this.#slots) n += s.outstanding.size;
    return n;
  }

  issue(request: LeafRequest): Promise<IssuedLeaf> {
    if (this.#closed) return Promise.reject(new PkiError('ERR_PKI_POOL_CLOSED', 'leaf issuer pool is closed'));
    if (this.#slots.length === 0) return Promise.reject(noWorkersLeft());
    return new Promise<IssuedLeaf>((resolve, reject) => {
      const id = this.#nextId++;
      this.#queuedPending.push({ spiffeId: request.spiffeId, resolve, reject });
      const q = this.#queued;
      q.ids.push(id);
      q.csrs.push(request.csr);
      q.spiffeIds.push(request.spiffeId);
      q.ttlSeconds.push(request.ttlSeconds);
      if (!this.#flushScheduled) {
        // After this turn's I/O callbacks: every request that arrived in one event-loop turn
        // (many gRPC calls per socket read) travels in one message per worker.
        this.#flushScheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#flushScheduled = false;
    if (this.#terminated) return;
    const q = this.#queued;
    const pending = this.#queuedPending;
    this.#queued = emptyQueue();
    this.#queuedPending = [];
    if (this.#slots.length === 0) {
      for (const p of pending) p.reject(noWorkersLeft());
      return;
    }
    for (let i = 0; i < q.ids.length; i += MAX_BATCH) {
      let best = this.#slots[0]!;
      for (const s of this.#slots) if (s.outstanding.size < best.outstanding.size) best = s;
      const j = Math.min(q.ids.length, i + MAX_BATCH);
      for (let k = i; k < j; k++) best.outstanding.set(q.ids[k]!, pending[k]!);
      // One chunk holding the whole turn (the common case) sends the queue's own arrays: they
      // were replaced above, nothing writes them again.
      const whole = i === 0 && j === q.ids.length;
      const batch: BatchMessage = whole
        ? { kind: 'batch', ids: q.ids, csrs: q.csrs, spiffeIds: q.spiffeIds, ttlSeconds: q.ttlSeconds }
        : { kind: 'batch', ids: q.ids.slice(i, j), csrs: q.csrs.slice(i, j), spiffeIds: q.spiffeIds.slice(i, j), ttlSeconds: q.ttlSeconds.slice(i, j) };
      best.worker.ref();
      best.worker.postMessage(batch);
    }
  }

  /**
   * Stops taking requests and terminates the workers. With `drainMs`, requests already taken
   * are answered first (for up to that long, e.g. when a signer rotation retires a pool);
   * whatever is still unanswered then fails with ERR_PKI_POOL_CLOSED.
   */
  async close(options: { readonly drainMs?: number } = {}): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const drainMs = options.drainMs ?? 0;
    if (drainMs > 0 && this.pending > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.#idle = resolve;
        timer = setTimeout(resolve, drainMs);
        timer.unref();
      });
      clearTimeout(timer);
      this.#idle = undefined;
    }
    this.#terminated = true;
    for (const s of this.#slots) {
      for (const p of s.outstanding.values()) p.reject(new PkiError('ERR_PKI_POOL_CLOSED', 'leaf issuer pool closed'));
      s.outstanding.clear();
    }
    for (const p of this.#queuedPending) p.reject(new PkiError('ERR_PKI_POOL_CLOSED', 'leaf issuer pool closed'));
    this.#queued = emptyQueue();
    this.#queuedPending = [];
    await Promise.all(this.#slots.map((s) => s.worker.terminate()));
  }
}
