/**
 * What the node authorizer needs to know about pods, as a small interface over plain data.
 * The real implementation is a Kubernetes informer (`pod-informer.ts`); tests use
 * `InMemoryPodIndex`.
 */

export interface PodInfo {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly serviceAccountName: string;
  /** Empty while unscheduled. */
  readonly nodeName: string;
  /** Pending | Running | Succeeded | Failed | Unknown */
  readonly phase: string;
}

/** A pod by namespace and name. */
export interface PodRef {
  readonly namespace: string;
  readonly name: string;
}

/** A service account on a node. */
export interface NodeAccountKey {
  readonly namespace: string;
  readonly serviceAccountName: string;
  readonly nodeName: string;
}

export interface PodIndex {
  /** True once the initial list is complete. */
  readonly synced: boolean;
  getPod(ref: PodRef): PodInfo | undefined;
  /** Pods with this (namespace, serviceAccountName, nodeName). */
  podsOnNode(key: NodeAccountKey): readonly PodInfo[];
  /** Whether one of them is active (phase neither Succeeded nor Failed): the node authorizer's question. */
  hasActivePodOnNode(key: NodeAccountKey): boolean;
  /** The same pods by integer slot, when the index keeps them so (compact-pod-index.ts); the node authorizer's fast path. */
  readonly slots?: PodSlots;
}

/**
 * Pods by slot, for a caller that looks the same pod up again and again (the node authorizer, for
 * a node agent's cached Caller). A slot's `stamp` changes whenever the pod in it is replaced,
 * updated or deleted, so (instance, slot, stamp) noted after a check still names exactly the pod
 * that was checked; anything else means: look it up again. Ids (node, account) are never reused
 * for another string within one instance.
 */
export interface PodSlots {
  /** Unique per index object in this process (an informer's re-list may build a new one). */
  readonly instance: number;
  /** The slot of the pod `namespace/name`, or -1. */
  slotOf(namespace: string, name: string): number;
  stamp(slot: number): number;
  /**
   * Moves (increases) whenever a slot marked with `watch` is written, or the active-pod table of
   * a marked slot's node moves (`tableBase`), and at no other time; each clears its mark. While it
   * has not moved since `watch(slot)`, that slot's stamp has not moved either and its node's
   * table is where it was, so a note of both can be trusted without reading either again.
   */
  readonly watchEpoch: number;
  /** Marks `slot`, and the node it is on, so that the slot's next upsert or remove, or the next move of that node's table, moves `watchEpoch`. */
  watch(slot: number): void;
  /** Whether the pod in `slot` has exactly this UID / runs as exactly this service account. */
  uidIs(slot: number, uid: string): boolean;
  serviceAccountIs(slot: number, serviceAccountName: string): boolean;
  /** The node id of the pod in `slot`, or -1 while it is unscheduled. */
  nodeOf(slot: number): number;
  nodeName(node: number): string;
  /** The id of the account `namespace/serviceAccountName`, or -1 while no pod has run as it (and for `''`, which stands for no identity). */
  accountId(namespace: string, serviceAccountName: string): number;
  /** Account ids made so far (they are 0 .. accounts - 1): at most this many identities can be granted. */
  readonly accounts: number;
  /** Whether `account` has an active pod on `node` (phase neither Succeeded nor Failed). */
  activeOnNode(node: number, account: number): boolean;
  /**
   * Where `node`'s table of active accounts is now (opaque numbers; entries 0: none yet), for
   * `activeIn`. Valid until the table moves, which a `watch` of a slot on that node signals.
   */
  tableBase(node: number): number;
  tableEntries(node: number): number;
  /** `activeOnNode` for the node whose table is at `base` with `entries` (as `tableBase`/`tableEntries` said). */
  activeIn(base: number, entries: number, account: number): boolean;
}

/** A pod that can still run (and so stand for its identity on its node). */
function isActivePhase(phase: string): boolean {
  return phase !== 'Failed' && phase !== 'Succeeded';
}

function saNodeKey(namespace: string, serviceAccountName: string, nodeName: string): string {
  return `${namespace}\0${serviceAccountName}\0${nodeName}`;
}

/**
 * A PodIndex over a map, kept up to date with `upsert`/`remove`. Used directly by unit tests
 * and as the store behind the informer adapter.
 */
export class InMemoryPodIndex implements PodIndex {
  readonly #byName = new Map<string, PodInfo>();
  readonly #bySaNode = new Map<string, Map<string, PodInfo>>();
  #synced: boolean;

  constructor(options: { readonly synced?: boolean } = {}) {
    this.#synced = options.synced ?? true;
  }

  get synced(): boolean {
    return this.#synced;
  }

  markSynced(synced = true): void {
    this.#synced = synced;
  }

  get size(): number {
    return this.#byName.size;
  }

  upsert(pod: PodInfo): void {
    this.remove(pod);
    const nameKey = `${pod.namespace}/${pod.name}`;
    this.#byName.set(nameKey, pod);
    const k = saNodeKey(pod.namespace, pod.serviceAccountName, pod.nodeName);
    let bucket = this.#bySaNode.get(k);
    if (!bucket) this.#bySaNode.set(k, (bucket = new Map()));
    bucket.set(nameKey, pod);
  }

  remove(ref: PodRef): void {
    const nameKey = `${ref.namespace}/${ref.name}`;
    const old = this.#byName.get(nameKey);
    if (!old) return;
    this.#byName.delete(nameKey);
    const k = saNodeKey(old.namespace, old.serviceAccountName, old.nodeName);
    const bucket = this.#bySaNode.get(k);
    bucket?.delete(nameKey);
    if (bucket && bucket.size === 0) this.#bySaNode.delete(k);
  }

  /** Every pod in the index (a copy). */
  all(): PodInfo[] {
    return [...this.#byName.values()];
  }

  clear(): void {
    this.#byName.clear();
    this.#bySaNode.clear();
  }

  getPod(ref: PodRef): PodInfo | undefined {
    return this.#byName.get(`${ref.namespace}/${ref.name}`);
  }

  podsOnNode(key: NodeAccountKey): readonly PodInfo[] {
    const bucket = this.#bySaNode.get(saNodeKey(key.namespace, key.serviceAccountName, key.nodeName));
    return bucket ? [...bucket.values()] : [];
  }

  hasActivePodOnNode(key: NodeAccountKey): boolean {
    const bucket = this.#bySaNode.get(saNodeKey(key.namespace, key.serviceAccountName, key.nodeName));
    if (bucket) for (const p of bucket.values()) if (isActivePhase(p.phase)) return true;
    return false;
  }
}
