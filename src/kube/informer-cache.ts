/**
 * The informer's cache and its callbacks: objects by namespace/name, each passed through the
 * transform before it is kept; a fresh list is diffed against the cache and each watch event
 * applied, so the callbacks see exactly the adds, updates and deletes. A throwing callback is
 * logged and never stops the informer.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { KubeApiError } from './errors.js';

export interface InformerHandlers<T> {
  readonly onAdd?: (obj: T) => void;
  readonly onUpdate?: (obj: T, old: T) => void;
  readonly onDelete?: (obj: T) => void;
  /** Called on each list/watch failure before the informer backs off and retries (it logs them itself). */
  readonly onError?: (err: unknown) => void;
}

export interface WatchEvent {
  readonly type?: unknown;
  readonly object?: unknown;
}

/** What a watch event did: `gone` (a 410 ERROR event: re-list), or the resourceVersion it moved to. */
export type Applied = 'gone' | { readonly resourceVersion?: string };

/**
 * Where an informer keeps what it lists and watches. `InformerCache` (objects by key, with the
 * callbacks) is the default; a caller with its own compact structure (the CA's pod index)
 * passes one instead. A list is `beginList`, `listed` per item, `endList` once complete (what the
 * list did not name is dropped then); a list that fails midway is begun again from scratch.
 */
export interface InformerStore<T> {
  readonly size: number;
  list(): T[];
  get(namespace: string | undefined, name: string): T | undefined;
  beginList(): void;
  listed(raw: T): void;
  endList(): void;
  /** One watch event: 'gone' for a 410 ERROR event (throws for other ERROR events, `errorEvent`). */
  apply(ev: WatchEvent): Applied;
}

/** An ERROR watch event: 'gone' for a 410, otherwise thrown as the KubeApiError it carries. */
export function errorEvent(ev: WatchEvent, what: string): 'gone' {
  const s = (ev.object ?? {}) as { code?: unknown; reason?: unknown; message?: unknown };
  const code = typeof s.code === 'number' ? s.code : 500;
  if (code === 410) return 'gone';
  throw new KubeApiError({
    what,
    httpStatus: code,
    ...(typeof s.reason === 'string' ? { reason: s.reason } : {}),
    ...(typeof s.message === 'string' ? { detail: s.message.slice(0, 500) } : {}),
  });
}

export function keyOf(o: KubernetesObject): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}

export class InformerCache<T extends KubernetesObject> implements InformerStore<T> {
  readonly #items = new Map<string, T>();
  /** The list being read (ingested items by key), between beginList and endList. */
  #fresh: Map<string, T> | undefined;
  readonly #handlers: InformerHandlers<T>;
  readonly #transform: ((obj: T) => T) | undefined;
  readonly #logger: Logger;
  readonly #what: string;

  /** `what` names the watch in errors (`watch /api/v1/pods`). */
  constructor(handlers: InformerHandlers<T>, transform: ((obj: T) => T) | undefined, logger: Logger, what: string) {
    this.#handlers = handlers;
    this.#transform = transform;
    this.#logger = logger;
    this.#what = what;
  }

  get size(): number {
    return this.#items.size;
  }

  list(): T[] {
    return [...this.#items.values()];
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#items.get(`${namespace ?? ''}/${name}`);
  }

  /** Applied to every object before it is cached and handed to the callbacks. */
  ingest(raw: T): T {
    return this.#transform ? this.#transform(raw) : raw;
  }

  beginList(): void {
    this.#fresh = new Map();
  }

  listed(raw: T): void {
    const item = this.ingest(raw);
    (this.#fresh ??= new Map()).set(keyOf(item), item);
  }

  endList(): void {
    this.replace(this.#fresh ?? new Map());
    this.#fresh = undefined;
  }

  /** Makes the cache `fresh` (a complete list, ingested): deletes first, then adds and updates. */
  replace(fresh: ReadonlyMap<string, T>): void {
    for (const [k, old] of [...this.#items]) {
      if (!fresh.has(k)) {
        this.#items.delete(k);
        this.#emit(() => this.#handlers.onDelete?.(old));
      }
    }
    for (const [k, item] of fresh) this.#upsert(k, item);
  }

  /**
   * Applies one watch event. Returns 'gone' for a 410 ERROR event and throws for any other
   * ERROR event; otherwise the resourceVersion the event carries (events and bookmarks).
   */
  apply(ev: WatchEvent): Applied {
    const type = ev.type;
    if (type === 'ERROR') return errorEvent(ev, this.#what);
    const obj = ev.object as T | undefined;
    if (obj === undefined || obj === null || typeof obj !== 'object') return {};
    switch (type) {
      case 'ADDED':
      case 'MODIFIED': {
        const item = this.ingest(obj);
        this.#upsert(keyOf(item), item);
        break;
      }
      case 'DELETED': {
        const k = keyOf(obj);
        const old = this.#items.get(k);
        this.#items.delete(k);
        if (old) {
          const item = this.ingest(obj);
          this.#emit(() => this.#handlers.onDelete?.(item));
        }
        break;
      }
      case 'BOOKMARK':
        break;
      default:
        return {};
    }
    const rv = obj.metadata?.resourceVersion;
    return rv ? { resourceVersion: rv } : {};
  }

  #upsert(k: string, item: T): void {
    const old = this.#items.get(k);
    this.#items.set(k, item);
    if (!old) this.#emit(() => this.#handlers.onAdd?.(item));
    else if (old.metadata?.resourceVersion !== item.metadata?.resourceVersion || old.metadata?.uid !== item.metadata?.uid) {
      this.#emit(() => this.#handlers.onUpdate?.(item, old));
    }
  }

  #emit(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.#logger.error('informer handler threw', { err: describeError(err) });
    }
  }
}
