/**
 * The CA's pod index at cluster scale: per pod only what node authorization reads, in columns.
 * A pod is a slot: its `namespace/name` key (the one string per pod, also the map key), its UID
 * as 16 bytes when it is a UUID (as the API server makes them; any other UID is kept as a
 * string), and small numbers for namespace, service account, node and phase, which are interned
 * (a cluster has few distinct ones). Each node has the list of its pods' slots and, beside it,
 * their (namespace, service account) ids, so `podsOnNode` reads what the node holds, in order,
 * and touches a pod's columns only when it matches.
 *
 * It is the informer's store (InformerStore): list pages and watch events upsert into it as
 * they are decoded, and a complete re-list drops the pods it did not name (a generation per
 * slot), so no second copy of the cluster is built for the diff. Unscheduled pods are in no
 * node's list (`podsOnNode` is only asked for the caller pod's node).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { errorEvent, type Applied, type InformerStore, type WatchEvent } from '../kube/informer-cache.js';
import type { PodIndex, PodInfo, PodRef } from './pod-index.js';

const PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** Strings to small numbers and back; never forgets (namespaces, accounts, nodes, phases are few). */
class Interned {
  readonly #ids = new Map<string, number>();
  readonly names: string[] = [];

  id(s: string): number {
    let id = this.#ids.get(s);
    if (id === undefined) {
      id = this.names.length;
      this.names.push(s);
      this.#ids.set(s, id);
    }
    return id;
  }

  find(s: string): number | undefined {
    return this.#ids.get(s);
  }
}

function grow<A extends Uint32Array | Uint8Array>(a: A, need: number, make: (n: number) => A): A {
  if (need <= a.length) return a;
  const b = make(Math.max(need, a.length * 2, 1024));
  b.set(a);
  return b;
}

export class CompactPodIndex implements PodIndex, InformerStore<V1Pod> {
  readonly #what: string;
  readonly #slotByKey = new Map<string, number>();
  #keys: Array<string | undefined> = [];
  #ns = new Uint32Array(0);
  #sa = new Uint32Array(0);
  #node = new Uint32Array(0);
  #gen = new Uint32Array(0);
  #phase = new Uint32Array(0);
  /** 16 bytes per slot: the UID when it is a UUID. */
  #uid = new Uint8Array(0);
  /** UIDs that are not UUIDs, by slot. */
  readonly #otherUid = new Map<number, string>();
  readonly #free: number[] = [];
  /** Slots per node id (unscheduled pods are in none), and beside them each slot's account id, so a node check reads two short arrays in order. */
  readonly #onNode: number[][] = [];
  readonly #onNodeAccount: number[][] = [];
  readonly #strings = { ns: new Interned(), sa: new Interned(), node: new Interned(), phase: new Interned(), account: new Interned() };
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
    return this.#slotByKey.size;
  }

  /** Adds or replaces a pod. */
  upsert(pod: PodInfo): void {
    const key = `${pod.namespace}/${pod.name}`;
    let slot = this.#slotByKey.get(key);
    const nodeId = pod.nodeName === '' ? undefined : this.#strings.node.id(pod.nodeName);
    const nsId = this.#strings.ns.id(pod.namespace);
    const saId = this.#strings.sa.id(pod.serviceAccountName);
    if (slot !== undefined) {
      const old = this.#nodeOf(slot);
      if (old !== undefined) this.#unlink(old, slot);
    } else {
      slot = this.#free.pop() ?? this.#keys.length;
      this.#ensure(slot + 1);
      this.#keys[slot] = key;
      this.#slotByKey.set(key, slot);
    }
    if (nodeId !== undefined) {
      (this.#onNode[nodeId] ??= []).push(slot);
      (this.#onNodeAccount[nodeId] ??= []).push(this.#strings.account.id(`${nsId}/${saId}`));
    }
    this.#ns[slot] = nsId;
    this.#sa[slot] = saId;
    this.#node[slot] = nodeId === undefined ? 0 : nodeId + 1;
    this.#phase[slot] = this.#strings.phase.id(pod.phase);
    this.#gen[slot] = this.#generation;
    this.#otherUid.delete(slot);
    if (UUID.test(pod.uid)) {
      for (let i = 0, j = 0; i < 16; i++, j += 2) {
        if (j === 8 || j === 13 || j === 18 || j === 23) j++;
        this.#uid[slot * 16 + i] = parseInt(pod.uid.slice(j, j + 2), 16);
      }
    } else this.#otherUid.set(slot, pod.uid);
  }

  remove(ref: PodRef): void {
    const key = `${ref.namespace}/${ref.name}`;
    const slot = this.#slotByKey.get(key);
    if (slot === undefined) return;
    this.#slotByKey.delete(key);
    const nodeId = this.#nodeOf(slot);
    if (nodeId !== undefined) this.#unlink(nodeId, slot);
    this.#keys[slot] = undefined;
    this.#otherUid.delete(slot);
    this.#free.push(slot);
  }

  getPod(ref: PodRef): PodInfo | undefined {
    const slot = this.#slotByKey.get(`${ref.namespace}/${ref.name}`);
    return slot === undefined ? undefined : this.#info(slot);
  }

  podsOnNode(key: { readonly namespace: string; readonly serviceAccountName: string; readonly nodeName: string }): readonly PodInfo[] {
    const nodeId = this.#strings.node.find(key.nodeName);
    const ns = this.#strings.ns.find(key.namespace);
    const sa = this.#strings.sa.find(key.serviceAccountName);
    if (nodeId === undefined || ns === undefined || sa === undefined) return [];
    const account = this.#strings.account.find(`${ns}/${sa}`);
    const accounts = this.#onNodeAccount[nodeId];
    if (account === undefined || accounts === undefined) return [];
    const slots = this.#onNode[nodeId]!;
    const out: PodInfo[] = [];
    for (let i = 0; i < accounts.length; i++) if (accounts[i] === account) out.push(this.#info(slots[i]!));
    return out;
  }

  /** Every pod (a copy). */
  all(): PodInfo[] {
    return [...this.#slotByKey.values()].map((s) => this.#info(s));
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
    for (const [key, slot] of [...this.#slotByKey]) {
      if (this.#gen[slot] !== this.#generation) {
        const cut = key.indexOf('/');
        this.remove({ namespace: key.slice(0, cut), name: key.slice(cut + 1) });
      }
    }
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

  #nodeOf(slot: number): number | undefined {
    const n = this.#node[slot]!;
    return n === 0 ? undefined : n - 1;
  }

  #unlink(nodeId: number, slot: number): void {
    const list = this.#onNode[nodeId]!;
    const accounts = this.#onNodeAccount[nodeId]!;
    const i = list.indexOf(slot);
    list[i] = list[list.length - 1]!;
    list.pop();
    accounts[i] = accounts[accounts.length - 1]!;
    accounts.pop();
  }

  #ensure(n: number): void {
    this.#ns = grow(this.#ns, n, (k) => new Uint32Array(k));
    this.#sa = grow(this.#sa, n, (k) => new Uint32Array(k));
    this.#node = grow(this.#node, n, (k) => new Uint32Array(k));
    this.#gen = grow(this.#gen, n, (k) => new Uint32Array(k));
    this.#phase = grow(this.#phase, n, (k) => new Uint32Array(k));
    this.#uid = grow(this.#uid, n * 16, (k) => new Uint8Array(k));
  }

  #info(slot: number): PodInfo {
    const key = this.#keys[slot]!;
    const nsName = this.#strings.ns.names[this.#ns[slot]!]!;
    const node = this.#nodeOf(slot);
    return {
      namespace: nsName,
      name: key.slice(nsName.length + 1),
      uid: this.#otherUid.get(slot) ?? this.#uuid(slot),
      serviceAccountName: this.#strings.sa.names[this.#sa[slot]!]!,
      nodeName: node === undefined ? '' : this.#strings.node.names[node]!,
      phase: this.#strings.phase.names[this.#phase[slot]!]!,
    };
  }

  #uuid(slot: number): string {
    const b = this.#uid;
    const o = slot * 16;
    let s = '';
    for (let i = 0; i < 16; i++) {
      if (i === 4 || i === 6 || i === 8 || i === 10) s += '-';
      s += HEX[b[o + i]!];
    }
    return s;
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
