/**
 * The in-memory object store: one global, monotonically increasing resourceVersion (like an
 * etcd revision), a bounded event history that watches replay from, and synchronous
 * listeners so a watch never misses an event between its snapshot and its subscription.
 * Objects are plain JSON; every read and write copies, so callers never share state. Each type's
 * keys (`namespace/name`) are also kept in order (ordered-keys.ts), so a list page seeks to its
 * continue key and copies only the objects it returns. Each stored object's JSON as a list item
 * (without apiVersion/kind) is kept beside it, written once when the object is stored and
 * replaced with it, so a list page in JSON (`pageJson`) is the cached texts, never a copy.
 */
import { OrderedKeys } from './ordered-keys.js';
import { storeKey, type ResourceType } from './resources.js';

export type KubeObject = Record<string, unknown> & { metadata: ObjectMeta };

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [k: string]: unknown;
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  readonly rv: number;
  readonly key: string; // store key of the resource type
  readonly type: EventType;
  /** The object after the change (for DELETED: the last state, carrying the deletion RV). */
  readonly object: KubeObject;
  /** The object before the change (MODIFIED, DELETED). */
  readonly prev: KubeObject | undefined;
}

export type StoreListener = (event: StoreEvent) => void;

/**
 * One page of a list in key order: `next` is the key to continue after (undefined on the last
 * page). Items are objects (`page`) or their JSON texts as list items, without apiVersion/kind
 * (`pageJson`).
 */
export interface StorePage<T = KubeObject> {
  readonly items: T[];
  readonly next: string | undefined;
  /** Objects after this page (counted only when there is no filter, as the API server does). */
  readonly remaining: number | undefined;
}

export interface PageRequest {
  /** Continue strictly after this key (`namespace/name`). */
  readonly after?: string;
  /** At most this many items (0 or absent: all). */
  readonly limit?: number;
  /** Only objects for which this holds (selectors); sees the stored object, must not change it. */
  readonly filter?: (o: KubeObject) => boolean;
}

interface Bucket {
  readonly objects: Map<string, KubeObject>;
  /** The JSON of each stored object as a list item (no apiVersion/kind); set and dropped with it. */
  readonly json: Map<string, string>;
  readonly keys: OrderedKeys;
}

/** The object without apiVersion/kind (as list items carry it), other keys in their order. */
export function stripTypeMeta(o: KubeObject): KubeObject {
  const { apiVersion: _a, kind: _k, ...rest } = o;
  return rest as KubeObject;
}

export interface StoreOptions {
  /** How many events watches can replay before older RVs become "too old" (410). */
  readonly historyLimit?: number;
  readonly firstResourceVersion?: number;
}

function objKey(ns: string | undefined, name: string): string {
  return `${ns ?? ''}/${name}`;
}

export class ObjectStore {
  #rv: number;
  #compactedRv: number;
  readonly #historyLimit: number;
  readonly #objects = new Map<string, Bucket>();
  #history: StoreEvent[] = [];
  readonly #listeners = new Set<StoreListener>();

  constructor(options: StoreOptions = {}) {
    this.#rv = options.firstResourceVersion ?? 1000;
    this.#compactedRv = this.#rv;
    this.#historyLimit = options.historyLimit ?? 20000;
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  /** Watches from an RV below this answer 410 Gone. */
  get compactedResourceVersion(): number {
    return this.#compactedRv;
  }

  #bucket(t: ResourceType): Bucket {
    const k = storeKey(t);
    let b = this.#objects.get(k);
    if (!b) {
      b = { objects: new Map(), json: new Map(), keys: new OrderedKeys() };
      this.#objects.set(k, b);
    }
    return b;
  }

  #put(t: ResourceType, key: string, obj: KubeObject): void {
    const b = this.#bucket(t);
    b.objects.set(key, obj);
    b.json.set(key, JSON.stringify(stripTypeMeta(obj)));
    b.keys.add(key);
  }

  get(t: ResourceType, ns: string | undefined, name: string): KubeObject | undefined {
    const o = this.#bucket(t).objects.get(objKey(t.namespaced ? ns : undefined, name));
    return o ? structuredClone(o) : undefined;
  }

  /** How many objects of a type are stored. */
  count(t: ResourceType): number {
    return this.#bucket(t).objects.size;
  }

  /** Objects of a type, optionally in one namespace, ordered by key (namespace, then name). */
  list(t: ResourceType, ns?: string): KubeObject[] {
    return this.page(t, ns, {}).items;
  }

  /**
   * One page of a list in key order, from just after `after`: O(log n + what it scans), the
   * store is neither copied nor sorted. Only the returned objects are copied.
   */
  page(t: ResourceType, ns: string | undefined, req: PageRequest): StorePage {
    const b = this.#bucket(t);
    return this.#scan(b, ns !== undefined && t.namespaced ? ns : undefined, req, (key) => structuredClone(b.objects.get(key)!));
  }

  /**
   * The same page as `page` (same keys, `next`, `remaining`), each item its cached JSON text as
   * a list item: nothing is copied or serialized per request.
   */
  pageJson(t: ResourceType, ns: string | undefined, req: PageRequest): StorePage<string> {
    const b = this.#bucket(t);
    return this.#scan(b, ns !== undefined && t.namespaced ? ns : undefined, req, (key) => b.json.get(key)!);
  }

  #scan<T>(b: Bucket, ns: string | undefined, req: PageRequest, take: (key: string) => T): StorePage<T> {
    const prefix = ns !== undefined ? `${ns}/` : '';
    const limit = req.limit !== undefined && req.limit > 0 ? req.limit : Infinity;
    const start = req.after !== undefined && req.after > prefix ? req.after : prefix;
    const items: T[] = [];
    let last: string | undefined;
    let more = false;
    for (const key of b.keys.from(start, start === req.after)) {
      if (!key.startsWith(prefix)) break;
      if (req.filter && !req.filter(b.objects.get(key)!)) continue;
      if (items.length === limit) {
        more = true;
        break;
      }
      items.push(take(key));
      last = key;
    }
    if (!more) return { items, next: undefined, remaining: undefined };
    // Keys after `last` within the range ('0' is the character after '/').
    const end = prefix === '' ? b.keys.size : b.keys.rank(`${ns}0`);
    return { items, next: last, remaining: req.filter ? undefined : end - b.keys.rank(last!) - 1 };
  }

  /** Stores a new object (caller has checked it does not exist) and stamps its resourceVersion. */
  create(t: ResourceType, obj: KubeObject): KubeObject {
    const stored = structuredClone(obj);
    stored.metadata.resourceVersion = String(++this.#rv);
    this.#put(t, objKey(stored.metadata.namespace, stored.metadata.name ?? ''), stored);
    this.#emit({ rv: this.#rv, key: storeKey(t), type: 'ADDED', object: stored, prev: undefined });
    return structuredClone(stored);
  }

  /** Replaces an existing object and stamps a new resourceVersion. */
  update(t: ResourceType, obj: KubeObject): KubeObject {
    const key = objKey(obj.metadata.namespace, obj.metadata.name ?? '');
    const prev = this.#bucket(t).objects.get(key);
    const stored = structuredClone(obj);
    stored.metadata.resourceVersion = String(++this.#rv);
    this.#put(t, key, stored);
    this.#emit({ rv: this.#rv, key: storeKey(t), type: 'MODIFIED', object: stored, prev });
    return structuredClone(stored);
  }

  /** Removes an object; the DELETED event (and the returned copy) carry a new resourceVersion. */
  delete(t: ResourceType, ns: string | undefined, name: string): KubeObject | undefined {
    const key = objKey(t.namespaced ? ns : undefined, name);
    const b = this.#bucket(t);
    const prev = b.objects.get(key);
    if (!prev) return undefined;
    b.objects.delete(key);
    b.json.delete(key);
    b.keys.delete(key);
    const last = structuredClone(prev);
    last.metadata.resourceVersion = String(++this.#rv);
    this.#emit({ rv: this.#rv, key: storeKey(t), type: 'DELETED', object: last, prev });
    return structuredClone(last);
  }

  /** Events after `rv` for one type, or 'expired' when history no longer reaches back that far. */
  eventsSince(t: ResourceType, rv: number): StoreEvent[] | 'expired' {
    if (rv < this.#compactedRv) return 'expired';
    const k = storeKey(t);
    return this.#history.filter((e) => e.rv > rv && e.key === k);
  }

  /** Forgets history up to `rv` (default: everything so far): older watches get 410. */
  compact(rv = this.#rv): void {
    this.#compactedRv = Math.max(this.#compactedRv, Math.min(rv, this.#rv));
    this.#history = this.#history.filter((e) => e.rv > this.#compactedRv);
  }

  subscribe(listener: StoreListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit(event: StoreEvent): void {
    this.#history.push(event);
    if (this.#history.length > this.#historyLimit) {
      const drop = this.#history.length - this.#historyLimit;
      this.#compactedRv = this.#history[drop - 1]!.rv;
      this.#history = this.#history.slice(drop);
    }
    for (const l of [...this.#listeners]) {
      try {
        l(event);
      } catch {
        // A broken listener (a dead socket) must not stop the others.
      }
    }
  }
}
