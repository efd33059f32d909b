/**
 * The CA's pod index at cluster scale: per pod only what node authorization reads. A pod is a
 * slot: its name (the one string per pod, the key of its namespace's map) and one 32-byte row
 * (namespace, account — the (namespace, service account) pair —, node and phase as interned ids —
 * a cluster has few distinct ones — and the UID as 16 bytes when it is a UUID, as the API server
 * makes them; any other UID is kept as a string), so reading a pod touches one cache line beside
 * its name. The node check (`hasActivePodOnNode`) is one probe of the node's own active-account
 * counts (node-account-counts.ts) instead of a walk of the node's pods: its cost does not grow
 * with the cluster. Each node also keeps its slots, for `podsOnNode`.
 *
 * Slots are also offered as PodSlots (pod-index.ts) to the node authorizer, which notes the
 * caller pod's slot and its stamp: every upsert and remove of a slot bumps the slot's stamp (a
 * 32-bit counter per slot: a note could only be fooled by exactly 2^32 changes of one pod between
 * two calls of one caller), so a changed, replaced or deleted pod is looked up afresh on the
 * very next call. A slot the authorizer noted is also `watch`ed: its next write moves one
 * index-wide `watchEpoch`, so while no watched pod (the node agents) has changed, a note stands
 * without reading its slot's stamp at all, however much the rest of the cluster churns.
 *
 * It is the informer's store (InformerStore): list pages and watch events upsert into it as
 * they are decoded, and a complete re-list drops the pods it did not name (a generation per
 * slot), so no second copy of the cluster is built for the diff. Unscheduled pods are on no
 * node (`podsOnNode` and `hasActivePodOnNode` are only asked for the caller pod's node).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { errorEvent, type Applied, type InformerStore, type WatchEvent } from '../kube/informer-cache.js';
import { NodeAccountCounts } from './node-account-counts.js';
import type { NodeAccountKey, PodIndex, PodInfo, PodRef, PodSlots } from './pod-index.js';
import { grow, Interned } from './interned.js';
import { parseUuid, uuidText } from './uuid-words.js';

const PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown'];
const SUCCEEDED = 2;
const FAILED = 3;
/** Row: namespace, account, node + 1 (0 = unscheduled), phase, UID (4 words); 32 bytes. */
const ROW = 8;
const R_NS = 0;
const R_ACCOUNT = 1;
const R_NODE = 2;
const R_PHASE = 3;
const R_UID = 4;

/** PodInfos kept for `getPod` at most (the pods callers are bound to: about one node agent per node). */
const MAX_LOOKED_UP = 4096;

const active = (phase: number) => phase !== SUCCEEDED && phase !== FAILED;

/** Index objects made in this process so far (each one's `instance`). */
let instances = 0;

export class CompactPodIndex implements PodIndex, PodSlots, InformerStore<V1Pod> {
  readonly instance = ++instances;
  readonly #what: string;
  /** Slots by name, per namespace id: the caller lookup reads a map of its own namespace (node agents' is small and hot), not one of the whole cluster. */
  readonly #byName: Array<Map<string, number> | undefined> = [];
  /** Each slot's pod name (its namespace is in the row). */
  #names: Array<string | undefined> = [];
  #count = 0;
  #rows = new Uint32Array(0);
  #gen = new Uint32Array(0);
  /** Bumped by every upsert and remove of the slot (PodSlots.stamp). */
  #stamps = new Uint32Array(0);
  /** 1 for a slot `watch`ed since its last write: its next upsert or remove moves `watchEpoch`. */
  #watched = new Uint8Array(0);
  #watchEpoch = 0;
  /** UIDs that are not UUIDs, by slot. */
  readonly #otherUid = new Map<number, string>();
  /**
   * `getPod`'s answers by slot, until that slot is written again: the authorizer looks the same
   * few caller pods (node agents) up on every call, and building the PodInfo (its UID text among
   * it) was most of the lookup. Bounded: cleared when full.
   */
  readonly #looked = new Map<number, PodInfo>();
  readonly #free: number[] = [];
  /** Slots per node id (unscheduled pods are in none). */
  readonly #onNode: number[][] = [];
  /** Active pods per (node, account); a move of a watched slot's node table moves the watch epoch too. */
  readonly #active = new NodeAccountCounts(() => this.#watchEpoch++);
  /** Account ids by service account id, per namespace id; and each account's service account id. */
  readonly #accounts: Array<Map<number, number> | undefined> = [];
  readonly #accountSa: number[] = [];
  /** UID words of a caller being checked (uidIs). */
  readonly #uidWords = new Uint32Array(4);
  readonly #strings = { ns: new Interned(), sa: new Interned(), node: new Interned(), phase: new Interned() };
  #generation = 0;
  #synced: boolean;

  constructor(options: { readonly what?: string; readonly synced?: boolean } = {}) {
    this.#what = options.what ?? 'watch pods';
    this.#synced = options.synced ?? true;
    for (const p of PHASES) this.#strings.phase.id(p);
  }

  get synced(): boolean {
    return this.#synced;
  }

  markSynced(synced = true): void {
    this.#synced = synced;
  }

  get size(): number {
    return this.#count;
  }

  get slots(): PodSlots {
    return this;
  }

  /** Adds or replaces a pod. */
  upsert(pod: PodInfo): void {
    const nsId = this.#strings.ns.id(pod.namespace);
    const names = (this.#byName[nsId] ??= new Map());
    let slot = names.get(pod.name);
    const nodeId = pod.nodeName === '' ? undefined : this.#strings.node.id(pod.nodeName);
    if (slot !== undefined) this.#unplace(slot);
    else {
      slot = this.#free.pop() ?? this.#names.length;
      this.#ensure(slot + 1);
      this.#names[slot] = pod.name;
      names.set(pod.name, slot);
      this.#count++;
    }
    const r = this.#rows;
    const o = slot * ROW;
    r[o + R_NS] = nsId;
    r[o + R_ACCOUNT] = this.#account(nsId, this.#strings.sa.id(pod.serviceAccountName));
    r[o + R_NODE] = nodeId === undefined ? 0 : nodeId + 1;
    r[o + R_PHASE] = this.#strings.phase.id(pod.phase);
    if (nodeId !== undefined) {
      (this.#onNode[nodeId] ??= []).push(slot);
      if (active(r[o + R_PHASE]!)) this.#active.add(nodeId, r[o + R_ACCOUNT]!);
    }
    this.#gen[slot] = this.#generation;
    this.#looked.delete(slot);
    this.#written(slot);
    this.#otherUid.delete(slot);
    if (!parseUuid(pod.uid, r, o + R_UID)) this.#otherUid.set(slot, pod.uid);
  }

  remove(ref: PodRef): void {
    const nsId = this.#strings.ns.find(ref.namespace);
    const names = nsId === undefined ? undefined : this.#byName[nsId];
    const slot = names?.get(ref.name);
    if (slot === undefined) return;
    names!.delete(ref.name);
    this.#count--;
    this.#unplace(slot);
    this.#written(slot);
    this.#names[slot] = undefined;
    this.#looked.delete(slot);
    this.#otherUid.delete(slot);
    this.#free.push(slot);
  }

  getPod(ref: PodRef): PodInfo | undefined {
    const nsId = this.#strings.ns.find(ref.namespace);
    const slot = nsId === undefined ? undefined : this.#byName[nsId]?.get(ref.name);
    if (slot === undefined) return undefined;
    let info = this.#looked.get(slot);
    if (info === undefined) {
      if (this.#looked.size >= MAX_LOOKED_UP) this.#looked.clear();
      info = this.#info(slot, ref.name);
      this.#looked.set(slot, info);
    }
    return info;
  }

  hasActivePodOnNode(key: NodeAccountKey): boolean {
    const node = this.#strings.node.find(key.nodeName);
    const account = this.#findAccount(key.namespace, key.serviceAccountName);
    return node !== undefined && account >= 0 && this.#active.count(node, account) > 0;
  }

  podsOnNode(key: NodeAccountKey): readonly PodInfo[] {
    const nodeId = this.#strings.node.find(key.nodeName);
    const account = this.#findAccount(key.namespace, key.serviceAccountName);
    const slots = nodeId === undefined ? undefined : this.#onNode[nodeId];
    if (slots === undefined || account < 0) return [];
    const r = this.#rows;
    return slots.filter((s) => r[s * ROW + R_ACCOUNT] === account).map((s) => this.#info(s));
  }

  // PodSlots: the node authorizer's fast path (pod-index.ts).

  slotOf(namespace: string, name: string): number {
    const nsId = this.#strings.ns.find(namespace);
    return (nsId === undefined ? undefined : this.#byName[nsId]?.get(name)) ?? -1;
  }

  stamp(slot: number): number {
    return this.#stamps[slot]!;
  }

  get watchEpoch(): number {
    return this.#watchEpoch;
  }

  watch(slot: number): void {
    if (slot < 0 || slot >= this.#names.length) return;
    this.#watched[slot] = 1;
    this.#active.watch(this.nodeOf(slot));
  }

  uidIs(slot: number, uid: string): boolean {
    if (this.#otherUid.size > 0) {
      const other = this.#otherUid.get(slot);
      if (other !== undefined) return other === uid;
    }
    // The row holds a UUID; the stored text is its canonical form, so only a canonical UID can equal it.
    const w = this.#uidWords;
    const o = slot * ROW + R_UID;
    const r = this.#rows;
    return parseUuid(uid, w, 0) && w[0] === r[o] && w[1] === r[o + 1] && w[2] === r[o + 2] && w[3] === r[o + 3];
  }

  serviceAccountIs(slot: number, serviceAccountName: string): boolean {
    return this.#strings.sa.find(serviceAccountName) === this.#accountSa[this.#rows[slot * ROW + R_ACCOUNT]!];
  }

  nodeOf(slot: number): number {
    return this.#rows[slot * ROW + R_NODE]! - 1;
  }

  nodeName(node: number): string {
    return this.#strings.node.names[node] ?? '';
  }

  accountId(namespace: string, serviceAccountName: string): number {
    // Pods without a service account (see toPodInfo) stand for no identity.
    return serviceAccountName === '' ? -1 : this.#findAccount(namespace, serviceAccountName);
  }

  get accounts(): number {
    return this.#accountSa.length;
  }

  activeOnNode(node: number, account: number): boolean {
    return this.#active.count(node, account) > 0;
  }

  tableBase(node: number): number {
    return node < 0 ? 0 : this.#active.tableBase(node);
  }

  tableEntries(node: number): number {
    return node < 0 ? 0 : this.#active.tableEntries(node);
  }

  activeIn(base: number, entries: number, account: number): boolean {
    return this.#active.countIn(base, entries, account) > 0;
  }

  /** Every pod (a copy). */
  all(): PodInfo[] {
    return this.#byName.flatMap((m) => (m === undefined ? [] : [...m.values()].map((s) => this.#info(s))));
  }

  // InformerStore: what the informer lists and watches.

  list(): V1Pod[] {
    return this.all().map(toSlimPod);
  }

  get(namespace: string | undefined, name: string): V1Pod | undefined {
    const p = this.getPod({ namespace: namespace ?? '', name });
    return p ? toSlimPod(p) : undefined;
  }

  beginList(): void {
    this.#generation = (this.#generation + 1) >>> 0;
  }

  listed(raw: V1Pod): void {
    const info = toPodInfo(raw);
    if (info) this.upsert(info);
  }

  endList(): void {
    this.#byName.forEach((m, nsId) => {
      const namespace = this.#strings.ns.names[nsId]!;
      for (const [name, slot] of [...(m ?? [])]) if (this.#gen[slot] !== this.#generation) this.remove({ namespace, name });
    });
  }

  apply(ev: WatchEvent): Applied {
    if (ev.type === 'ERROR') return errorEvent(ev, this.#what);
    const obj = ev.object as V1Pod | undefined;
    if (obj === undefined || obj === null || typeof obj !== 'object') return {};
    switch (ev.type) {
      case 'ADDED':
      case 'MODIFIED':
        this.listed(obj);
        break;
      case 'DELETED':
        if (obj.metadata?.name && obj.metadata.namespace) this.remove({ namespace: obj.metadata.namespace, name: obj.metadata.name });
        break;
      case 'BOOKMARK':
        break;
      default:
        return {};
    }
    const rv = obj.metadata?.resourceVersion;
    return rv ? { resourceVersion: rv } : {};
  }

  /** Every upsert and remove of `slot` ends here: its stamp moves, and the watch epoch when the slot was watched. */
  #written(slot: number): void {
    this.#stamps[slot] = (this.#stamps[slot]! + 1) >>> 0;
    if (this.#watched[slot] !== 0) {
      this.#watched[slot] = 0;
      this.#watchEpoch++;
    }
  }

  /** Takes a stored slot off its node (its list and the active counts). */
  #unplace(slot: number): void {
    const o = slot * ROW;
    const n = this.#rows[o + R_NODE]!;
    if (n === 0) return;
    const nodeId = n - 1;
    const list = this.#onNode[nodeId]!;
    const i = list.indexOf(slot);
    list[i] = list[list.length - 1]!;
    list.pop();
    if (active(this.#rows[o + R_PHASE]!)) this.#active.remove(nodeId, this.#rows[o + R_ACCOUNT]!);
    this.#rows[o + R_NODE] = 0;
  }

  #ensure(n: number): void {
    this.#rows = grow(this.#rows, n * ROW, (k) => new Uint32Array(k));
    this.#gen = grow(this.#gen, n, (k) => new Uint32Array(k));
    this.#stamps = grow(this.#stamps, n, (k) => new Uint32Array(k));
    this.#watched = grow(this.#watched, n, (k) => new Uint8Array(k));
  }

  /** The account id of (namespace id, service account id), made when new. */
  #account(nsId: number, saId: number): number {
    const bySa = (this.#accounts[nsId] ??= new Map());
    let account = bySa.get(saId);
    if (account === undefined) {
      account = this.#accountSa.length;
      this.#accountSa.push(saId);
      bySa.set(saId, account);
    }
    return account;
  }

  /** The account id of `namespace/serviceAccountName`, or -1 when no pod ever ran as it here. */
  #findAccount(namespace: string, serviceAccountName: string): number {
    const nsId = this.#strings.ns.find(namespace);
    const saId = this.#strings.sa.find(serviceAccountName);
    if (nsId === undefined || saId === undefined) return -1;
    return this.#accounts[nsId]?.get(saId) ?? -1;
  }

  /** The pod in `slot` (`name` when the caller has it: its name is not read again). */
  #info(slot: number, name?: string): PodInfo {
    const r = this.#rows;
    const o = slot * ROW;
    const nsName = this.#strings.ns.names[r[o + R_NS]!]!;
    const node = r[o + R_NODE]!;
    return {
      namespace: nsName,
      name: name ?? this.#names[slot]!,
      uid: this.#otherUid.get(slot) ?? uuidText(r, o + R_UID),
      serviceAccountName: this.#strings.sa.names[this.#accountSa[r[o + R_ACCOUNT]!]!]!,
      nodeName: node === 0 ? '' : this.#strings.node.names[node - 1]!,
      phase: this.#strings.phase.names[r[o + R_PHASE]!]!,
    };
  }
}

/**
 * A pod as the authorizer sees it. `spec.serviceAccountName` is taken as it is, never defaulted:
 * the apiserver sets it on every ordinary pod, and it is empty only on mirror pods of static
 * pods, which whoever can write a node's manifest directory (node root) can create in any
 * namespace. Such a pod is indexed under no service account (`''`, which no SPIFFE ID names),
 * so it never authorizes impersonation of `<ns>/default` or anything else.
 */
export function toPodInfo(p: V1Pod): PodInfo | undefined {
  const m = p.metadata;
  if (!m?.name || !m.namespace) return undefined;
  return {
    namespace: m.namespace,
    name: m.name,
    uid: m.uid ?? '',
    serviceAccountName: p.spec?.serviceAccountName ?? '',
    nodeName: p.spec?.nodeName ?? '',
    phase: p.status?.phase ?? 'Pending',
  };
}

function toSlimPod(p: PodInfo): V1Pod {
  return {
    metadata: { namespace: p.namespace, name: p.name, uid: p.uid },
    spec: { containers: [], serviceAccountName: p.serviceAccountName, nodeName: p.nodeName },
    status: { phase: p.phase },
  } as V1Pod;
}
