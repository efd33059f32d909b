/**
 * `LeafIssuerPool`: the fast leaf path on N worker threads (default: one per core), so the
 * CA issues on every core while its own thread serves gRPC. Requests arriving in the same
 * tick are batched per worker (fewer messages); each goes to the worker with the fewest
 * outstanding requests. Errors come back with their code as a PkiError/SpiffeError.
 * `setSigner` swaps the CA (cacerts reload) for every later request. Idle workers are
 * unref'd, so a pool never keeps a process alive on its own.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { CertbrokerError } from '../core/errors.js';
import { SpiffeError, type SpiffeErrorCode } from '../spiffe/errors.js';
import { PkiError, type PkiErrorCode } from './errors.js';
import { LeafTemplate, type IssuedLeaf, type LeafRequest, type LeafSigner } from './leaf-template.js';
import type { ResultsMessage, WorkerItem } from './leaf-pool-protocol.js';

export interface LeafIssuerPoolOptions {
  readonly signer: LeafSigner;
  /** Worker count; default os.availableParallelism(). */
  readonly size?: number;
  readonly maxTtlSeconds?: number;
}

interface Pending {
  readonly resolve: (leaf: IssuedLeaf) => void;
  readonly reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  outstanding: Map<number, Pending>;
  queued: WorkerItem[];
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
  #flushScheduled = false;
  #closed = false;

  constructor(options: LeafIssuerPoolOptions) {
    new LeafTemplate(options.signer); // throws a coded error for an unusable signer, here, not in a worker
    this.size = Math.max(1, options.size ?? availableParallelism());
    this.#signer = options.signer;
    this.#maxTtlSeconds = options.maxTtlSeconds;
    for (let i = 0; i < this.size; i++) this.#slots.push(this.#spawn());
  }

  #spawn(): Slot {
    const worker = new Worker(new URL('./leaf-worker.js', import.meta.url));
    const slot: Slot = { worker, outstanding: new Map(), queued: [] };
    worker.postMessage({ kind: 'signer', signer: this.#signer, maxTtlSeconds: this.#maxTtlSeconds });
    worker.on('message', (msg: ResultsMessage) => {
      for (const r of msg.results) {
        const p = slot.outstanding.get(r.id);
        if (!p) continue;
        slot.outstanding.delete(r.id);
        if ('leaf' in r) p.resolve({ ...r.leaf, der: Buffer.from(r.leaf.der.buffer, r.leaf.der.byteOffset, r.leaf.der.byteLength) });
        else p.reject(errorFromCode(r.code, r.message));
      }
      if (slot.outstanding.size === 0) worker.unref();
    });
    const fail = (reason: string) => {
      const idx = this.#slots.indexOf(slot);
      for (const p of slot.outstanding.values()) p.reject(new PkiError('ERR_PKI_POOL_WORKER', `leaf worker ${reason}`));
      slot.outstanding.clear();
      if (idx >= 0 && !this.#closed) this.#slots[idx] = this.#spawn();
    };
    worker.on('error', (err) => fail(`failed: ${err instanceof Error ? err.message : String(err)}`));
    worker.on('exit', (code) => {
      if (!this.#closed) fail(`exited with code ${code}`);
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
    let n = 0;
    for (const s of this.#slots) n += s.outstanding.size + s.queued.length;
    return n;
  }

  issue(request: LeafRequest): Promise<IssuedLeaf> {
    if (this.#closed) return Promise.reject(new PkiError('ERR_PKI_POOL_CLOSED', 'leaf issuer pool is closed'));
    return new Promise<IssuedLeaf>((resolve, reject) => {
      let best = this.#slots[0]!;
      for (const s of this.#slots) {
        if (s.outstanding.size + s.queued.length < best.outstanding.size + best.queued.length) best = s;
      }
      const id = this.#nextId++;
      best.outstanding.set(id, { resolve, reject });
      best.queued.push({ id, csr: request.csr, spiffeId: request.spiffeId, ttlSeconds: request.ttlSeconds });
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        queueMicrotask(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#flushScheduled = false;
    for (const s of this.#slots) {
      if (s.queued.length === 0) continue;
      const items = s.queued;
      s.queued = [];
      s.worker.ref();
      for (let i = 0; i < items.length; i += MAX_BATCH) {
        s.worker.postMessage({ kind: 'batch', items: items.slice(i, i + MAX_BATCH) });
      }
    }
  }

  /** Terminates the workers; unanswered requests fail with ERR_PKI_POOL_CLOSED. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#slots) {
      for (const p of s.outstanding.values()) p.reject(new PkiError('ERR_PKI_POOL_CLOSED', 'leaf issuer pool closed'));
      s.outstanding.clear();
    }
    await Promise.all(this.#slots.map((s) => s.worker.terminate()));
  }
}
