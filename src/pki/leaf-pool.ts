/**
 * `LeafIssuerPool`: the fast leaf path on N worker threads (default: one per core), so the
 * CA issues on every core while its own thread serves gRPC. Requests arriving in the same
 * event-loop turn travel together: each chunk of up to MAX_BATCH goes whole to the worker with
 * the fewest outstanding requests. (Balancing request by request instead split every turn's
 * requests over all workers, so batches shrank round trip after round trip to ~2 requests per
 * message and the main thread paid ~4× more per certificate.) Errors come back with their code as a PkiError/SpiffeError.
 * `setSigner` swaps the CA for every later request; `close({drainMs})` answers the requests
 * already taken before it terminates the workers. A worker that dies fails its outstanding
 * requests with ERR_PKI_POOL_WORKER and is replaced. Idle workers are unref'd, so a pool never
 * keeps a process alive on its own.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { CertbrokerError } from '../core/errors.js';
import { SpiffeError, type SpiffeErrorCode } from '../spiffe/errors.js';
import { PkiError, type PkiErrorCode } from './errors.js';
import { LeafTemplate, type IssuedLeaf, type LeafRequest, type LeafSigner } from './leaf-template.js';
import type { BatchMessage, ResultsMessage } from './leaf-pool-protocol.js';

export interface LeafIssuerPoolOptions {
  readonly signer: LeafSigner;
  /** Worker count; default os.availableParallelism(). */
  readonly size?: number;
  readonly maxTtlSeconds?: number;
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
  worker: Worker;
  outstanding: Map<number, Pending>;
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
      der ??= pemBody(pem);
      return der;
    },
  };
}

function pemBody(pem: string): Buffer {
  const start = pem.indexOf('\n') + 1;
  const end = pem.indexOf('-----END');
  return Buffer.from(pem.slice(start, end), 'base64');
}

/** Largest batch per message: several queued messages keep a worker busy between round trips. */
const MAX_BATCH = 32;

function errorFromCode(code: string, message: string): CertbrokerError {
  if (code.startsWith('ERR_SPIFFE') || code.startsWith('ERR_SVID')) return new SpiffeError(code as SpiffeErrorCode, message);
  if (code.startsWith('ERR_PKI')) return new PkiError(code as PkiErrorCode, message);
  return new PkiError('ERR_PKI_POOL_WORKER', message);
}

export class LeafIssuerPool {
  readonly size: number;
  readonly #slots: Slot[] = [];
  #signer: LeafSigner;
  readonly #maxTtlSeconds: number | undefined;
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
    for (let i = 0; i < this.size; i++) this.#slots.push(this.#spawn());
  }

  #spawn(): Slot {
    const worker = new Worker(new URL('./leaf-worker.js', import.meta.url), {
      // Never inherit the parent's node flags (e.g. `--input-type=module -e`), which break the worker.
      execArgv: [],
    });
    const slot: Slot = { worker, outstanding: new Map() };
    worker.postMessage({ kind: 'signer', signer: this.#signer, maxTtlSeconds: this.#maxTtlSeconds });
    worker.on('message', (msg: ResultsMessage) => {
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
    const fail = (reason: string) => {
      const idx = this.#slots.indexOf(slot);
      for (const p of slot.outstanding.values()) p.reject(new PkiError('ERR_PKI_POOL_WORKER', `leaf worker ${reason}`));
      slot.outstanding.clear();
      if (idx >= 0 && !this.#terminated) this.#slots[idx] = this.#spawn();
      if (this.#idle && this.pending === 0) this.#idle();
    };
    worker.on('error', (err) => fail(`failed: ${err instanceof Error ? err.message : String(err)}`));
    worker.on('exit', (code) => {
      if (!this.#terminated) fail(`exited with code ${code}`);
    });
    worker.unref();
    return slot;
  }

  /** Replaces the signing CA for all later requests (e.g. after a cacerts reload). */
  setSigner(signer: LeafSigner): void {
    new LeafTemplate(signer);
    this.#signer = signer;
    for (const s of this.#slots) s.worker.postMessage({ kind: 'signer', signer, maxTtlSeconds: this.#maxTtlSeconds });
  }

  /** Requests not yet answered, over all workers. */
  get pending(): number {
    let n = this.#queuedPending.length;
    for (const s of this.#slots) n += s.outstanding.size;
    return n;
  }

  issue(request: LeafRequest): Promise<IssuedLeaf> {
    if (this.#closed) return Promise.reject(new PkiError('ERR_PKI_POOL_CLOSED', 'leaf issuer pool is closed'));
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
    for (let i = 0; i < q.ids.length; i += MAX_BATCH) {
      let best = this.#slots[0]!;
      for (const s of this.#slots) if (s.outstanding.size < best.outstanding.size) best = s;
      const j = Math.min(q.ids.length, i + MAX_BATCH);
      for (let k = i; k < j; k++) best.outstanding.set(q.ids[k]!, pending[k]!);
      const batch: BatchMessage = {
        kind: 'batch',
        ids: q.ids.slice(i, j),
        csrs: q.csrs.slice(i, j),
        spiffeIds: q.spiffeIds.slice(i, j),
        ttlSeconds: q.ttlSeconds.slice(i, j),
      };
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
