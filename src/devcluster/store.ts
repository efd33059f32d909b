/**
 * The in-memory object store: one global, monotonically increasing resourceVersion (like an
 * etcd revision), a bounded event history that watches replay from, and synchronous
 * listeners so a watch never misses an event between its snapshot and its subscription.
 * Objects are plain JSON; every read and write copies, so callers never share state.
 */
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
  readonly #objects = new Map<string, Map<string, KubeObject>>();
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

  #bucket(t: ResourceType): Map<string, KubeObject> {
    const k = storeKey(t);
    let b = this.#objects.get(k);
    if (!b) {
      b = new Map();
      this.#objects.set(k, b);
    }
    return b;
  }

  get(t: ResourceType, ns: string | undefined, name: string): KubeObject | undefined {
    const o = this.#bucket(t).get(objKey(t.namespaced ? ns : undefined, name));
    return o ? structuredClone(o) : undefined;
  }

  /** Objects of a type, optionally in one namespace, ordered by namespace then name. */
  list(t: ResourceType, ns?: string): KubeObject[] {
    const out: KubeObject[] = [];
    for (const o of this.#bucket(t).values()) {
      if (ns !== undefined && t.namespaced && o.metadata.namespace !== ns) continue;
      out.push(structuredClone(o));
    }
    return out.sort((a, b) => objKey(a.metadata.namespace, a.metadata.name ?? '').localeCompare(objKey(b.metadata.namespace, b.metadata.name ?? '')));
  }

  /** Stores a new object (caller has checked it does not exist) and stamps its resourceVersion. */
  create(t: ResourceType, obj: KubeObject): KubeObject {
    const stored = structuredClone(obj);
    stored.metadata.resourceVersion = String(++this.#rv);
    this.#bucket(t).set(objKey(stored.metadata.namespace, stored.metadata.name ?? ''), stored);
    this.#emit({ rv: this.#rv, key: storeKey(t), type: 'ADDED', object: stored, prev: undefined });
    return structuredClone(stored);
  }

  /** Replaces an existing object and stamps a new resourceVersion. */
  update(t: ResourceType, obj: KubeObject): KubeObject {
    const key = objKey(obj.metadata.namespace, obj.metadata.name ?? '');
    const prev = this.#bucket(t).get(key);
    const stored = structuredClone(obj);
    stored.metadata.resourceVersion = String(++this.#rv);
    this.#bucket(t).set(key, stored);
    this.#emit({ rv: this.#rv, key: storeKey(t), type: 'MODIFIED', object: stored, prev });
    return structuredClone(stored);
  }

  /** Removes an object; the DELETED event (and the returned copy) carry a new resourceVersion. */
  delete(t: ResourceType, ns: string | undefined, name: string): KubeObject | undefined {
    const key = objKey(t.namespaced ? ns : undefined, name);
    const prev = this.#bucket(t).get(key);
    if (!prev) return undefined;
    this.#bucket(t).delete(key);
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
