/**
 * The simulated kubelet's pod certificate manager (pkg/kubelet/podcertificate, Kubernetes
 * 1.35): for every podCertificate projected volume source of a pod bound to a node it makes a
 * key, creates a PodCertificateRequest as that node (`system:node:<name>`, so authorization
 * and NodeRestriction apply), waits for the signer, writes the credential files into the pod's
 * volume directory, and refreshes at status.beginRefreshAt plus up to 5 minutes of jitter, on
 * the injected clock. Denied and Failed are final for the projection, as in the kubelet.
 *
 * Per projection: initial -> wait -> fresh -> wait-refresh -> fresh ...; wait and
 * wait-refresh end in denied or failed when the signer says so. A request deleted while
 * awaited is made again.
 */
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import type { Secret } from '../core/secret.js';
import type { KubeObject, ObjectStore, StoreEvent } from './store.js';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { findResource, storeKey, type ResourceType } from './resources.js';
import { isoSeconds } from './admission.js';
import { PCR } from './pcr-admission.js';
import { statusOf } from './pcr-validation.js';
import { generateProvenKey, isPodCertificateKeyType } from './pod-certificate-keys.js';
import { cleanCertificateChain, podCertificateSources, projectedVolumeDir, writeCredentialFiles, type PodCertificateSource } from './pod-certificate-volumes.js';

const POD = findResource('', 'v1', 'pods')!;
const NODE = findResource('', 'v1', 'nodes')!;
const SA = findResource('', 'v1', 'serviceaccounts')!;
const EVENT = findResource('', 'v1', 'events')!;
const PCR_KEY = storeKey(PCR);
/** kubelet's jitterDuration: up to five minutes after beginRefreshAt. */
export const REFRESH_JITTER_MS = 5 * 60_000;
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 60_000;

type Held = { readonly key: Secret<string>; readonly chain: string; readonly refreshAtMs: number; readonly notAfterMs: number };
type State =
  | { readonly kind: 'initial' }
  | { readonly kind: 'wait'; readonly key: Secret<string>; readonly pcr: string }
  | ({ readonly kind: 'fresh' } & Held)
  | ({ readonly kind: 'wait-refresh'; readonly refreshKey: Secret<string>; readonly pcr: string } & Held)
  | { readonly kind: 'denied' | 'failed'; readonly reason: string; readonly message: string };

interface Projection {
  readonly namespace: string;
  readonly podName: string;
  readonly podUid: string;
  readonly source: PodCertificateSource;
  state: State;
  running: boolean;
  again: boolean;
  timer: AbortController | undefined;
  failures: number;
}

export interface PodCertificateManagerOptions {
  readonly store: ObjectStore;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  /** Where pod volumes live; no files are written when unset. */
  readonly podsDir: string | undefined;
  /** Creates an object (a request, an event) as `system:node:<node>` through the API's authorization and admission. */
  readonly createAsNode: (node: string, t: ResourceType, namespace: string, body: Record<string, unknown>) => KubeObject;
  /** A pod's credentials changed (issued or refreshed): the kubelet may start it now. */
  readonly onIssued: (namespace: string, podName: string) => void;
}

export type ProjectionState = State['kind'];

export class PodCertificateManager {
  readonly #o: PodCertificateManagerOptions;
  readonly #projections = new Map<string, Projection>();
  #unsubscribe: (() => void) | undefined;

  constructor(options: PodCertificateManagerOptions) {
    this.#o = options;
  }

  start(): void {
    if (this.#unsubscribe) return;
    this.#unsubscribe = this.#o.store.subscribe((e) => this.#onEvent(e));
    for (const p of this.#o.store.list(POD)) this.#track(p);
  }

  stop(): void {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    for (const p of this.#projections.values()) p.timer?.abort();
    this.#projections.clear();
  }

  /** True when the pod needs no pod certificate or every one of its projections has credentials. */
  ready(pod: KubeObject): boolean {
    return podCertificateSources(pod).every((s) => {
      const kind = this.#projections.get(keyOf(pod.metadata.uid!, s))?.state.kind;
      return kind === 'fresh' || kind === 'wait-refresh';
    });
  }

  /** The state of each projection of a pod (tests, diagnostics). */
  states(podUid: string): Array<{ volumeName: string; sourceIndex: number; state: ProjectionState }> {
    return [...this.#projections.values()].filter((p) => p.podUid === podUid).map((p) => ({ volumeName: p.source.volumeName, sourceIndex: p.source.sourceIndex, state: p.state.kind }));
  }

  #onEvent(e: StoreEvent): void {
    if (e.key === POD.plural) {
      if (e.type === 'DELETED' || e.object.metadata.deletionTimestamp) this.#forget(e.object.metadata.uid!);
      else this.#track(e.object);
      return;
    }
    if (e.key !== PCR_KEY) return;
    const podUid = String((e.object.spec as { podUID?: unknown } | undefined)?.podUID ?? '');
    for (const p of this.#projections.values()) {
      if (p.podUid === podUid && 'pcr' in p.state && p.state.pcr === e.object.metadata.name) this.#kick(p);
    }
  }

  #track(pod: KubeObject): void {
    const nodeName = (pod.spec as { nodeName?: string } | undefined)?.nodeName;
    if (!nodeName || pod.metadata.deletionTimestamp) return;
    for (const source of podCertificateSources(pod)) {
      const key = keyOf(pod.metadata.uid!, source);
      if (this.#projections.has(key)) continue;
      const p: Projection = { namespace: pod.metadata.namespace!, podName: pod.metadata.name!, podUid: pod.metadata.uid!, source, state: { kind: 'initial' }, running: false, again: false, timer: undefined, failures: 0 };
      this.#projections.set(key, p);
      this.#kick(p);
    }
  }

  #forget(podUid: string): void {
    let had = false;
    for (const [key, p] of this.#projections) {
      if (p.podUid !== podUid) continue;
      had = true;
      p.timer?.abort();
      this.#projections.delete(key);
    }
    // The pod's volumes go with it, as the kubelet tears them down.
    if (had && this.#o.podsDir !== undefined) void rm(join(this.#o.podsDir, podUid), { recursive: true, force: true }).catch(() => undefined);
  }

  /** kubelet's Warning event on the pod for a Denied or Failed request. */
  #event(p: Projection, pod: KubeObject, reason: string, message: string): void {
    const node = (pod.spec as { nodeName: string }).nodeName;
    const now = isoSeconds(this.#o.clock.now());
    try {
      this.#o.createAsNode(node, EVENT, p.namespace, {
        metadata: { generateName: `${p.podName}.` },
        involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace: p.namespace, name: p.podName, uid: p.podUid },
        type: 'Warning', reason, message, count: 1, firstTimestamp: now, lastTimestamp: now,
        source: { component: 'kubelet', host: node }, reportingComponent: 'kubelet', reportingInstance: node,
      });
    } catch (err) {
      this.#o.logger.debug('pod certificate: event not recorded', { namespace: p.namespace, pod: p.podName, err: err instanceof Error ? err.message : String(err) });
    }
  }

  /** Runs the projection's step now; one at a time per projection, a kick while it runs runs it once more. */
  #kick(p: Projection): void {
    if (p.running) {
      p.again = true;
      return;
    }
    p.running = true;
    void (async () => {
      do {
        p.again = false;
        try {
          await this.#step(p);
          p.failures = 0;
        } catch (err) {
          p.failures++;
          this.#o.logger.warn('pod certificate: step failed, retrying', { namespace: p.namespace, pod: p.podName, volume: p.source.volumeName, err: err instanceof Error ? err.message : String(err) });
          this.#arm(p, this.#o.clock.now() + Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** (p.failures - 1)));
        }
      } while (p.again && this.#projections.get(keyOf(p.podUid, p.source)) === p);
      p.running = false;
    })();
  }

  /** Wakes the projection at `dueMs` on the injected clock (one timer each). */
  #arm(p: Projection, dueMs: number): void {
    p.timer?.abort();
    const timer = new AbortController();
    p.timer = timer;
    this.#o.clock.sleep(Math.max(0, dueMs - this.#o.clock.now()), timer.signal).then(
      () => {
        if (p.timer === timer) p.timer = undefined;
        if (this.#projections.get(keyOf(p.podUid, p.source)) === p) this.#kick(p);
      },
      () => undefined,
    );
  }

  async #step(p: Projection): Promise<void> {
    const pod = this.#o.store.get(POD, p.namespace, p.podName);
    if (!pod || pod.metadata.uid !== p.podUid) return this.#forget(p.podUid);
    const s = p.state;
    switch (s.kind) {
      case 'initial': {
        const { key, name } = await this.#request(p, pod);
        p.state = { kind: 'wait', key, pcr: name };
        return;
      }
      case 'wait':
      case 'wait-refresh':
        return this.#await(p, pod, s);
      case 'fresh': {
        if (this.#o.clock.now() < s.refreshAtMs) return this.#arm(p, s.refreshAtMs);
        const { key, name } = await this.#request(p, pod);
        p.state = { ...s, kind: 'wait-refresh', refreshKey: key, pcr: name };
        return;
      }
      default:
        return;
    }
  }

  /** Looks at the awaited request: issued (credentials written), denied, failed, gone, or still pending. */
  async #await(p: Projection, pod: KubeObject, s: Extract<State, { kind: 'wait' | 'wait-refresh' }>): Promise<void> {
    const pcr = this.#o.store.get(PCR, p.namespace, s.pcr);
    if (!pcr) {
      p.state = s.kind === 'wait' ? { kind: 'initial' } : { kind: 'fresh', key: s.key, chain: s.chain, refreshAtMs: s.refreshAtMs, notAfterMs: s.notAfterMs };
      p.again = true;
      return;
    }
    const status = statusOf(pcr);
    const done = (status.conditions ?? []).find((c) => c.status === 'True' && (c.type === 'Issued' || c.type === 'Denied' || c.type === 'Failed'));
    if (!done) return;
    if (done.type !== 'Issued') {
      p.state = { kind: done.type === 'Denied' ? 'denied' : 'failed', reason: String(done.reason ?? ''), message: String(done.message ?? '') };
      this.#o.logger.warn(`pod certificate request ${String(done.type).toLowerCase()}`, { namespace: p.namespace, pod: p.podName, request: s.pcr, reason: done.reason, message: done.message });
      this.#event(p, pod, String(done.type), `PodCertificateRequest ${p.namespace}/${s.pcr} ${done.type === 'Denied' ? 'was denied' : 'failed'}, reason=${JSON.stringify(done.reason ?? '')}, message=${JSON.stringify(done.message ?? '')}`);
      return;
    }
    const key = s.kind === 'wait' ? s.key : s.refreshKey;
    const chain = cleanCertificateChain(String(status.certificateChain ?? ''));
    const refreshAtMs = Date.parse(String(status.beginRefreshAt)) + Math.floor(this.#o.rng() * REFRESH_JITTER_MS);
    await this.#write(p, key, chain);
    p.state = { kind: 'fresh', key, chain, refreshAtMs, notAfterMs: Date.parse(String(status.notAfter)) };
    this.#o.logger.info('pod certificate issued', { namespace: p.namespace, pod: p.podName, volume: p.source.volumeName, request: s.pcr, refreshAt: new Date(refreshAtMs).toISOString() });
    this.#arm(p, refreshAtMs);
    this.#o.onIssued(p.namespace, p.podName);
  }

  async #write(p: Projection, key: Secret<string>, chain: string): Promise<void> {
    if (this.#o.podsDir === undefined) return;
    await writeCredentialFiles(projectedVolumeDir(this.#o.podsDir, p.podUid, p.source.volumeName), p.source, key.reveal(), chain);
  }

  /** A fresh key and a PodCertificateRequest for it, created as the pod's node. */
  async #request(p: Projection, pod: KubeObject): Promise<{ key: Secret<string>; name: string }> {
    const spec = pod.spec as { nodeName: string; serviceAccountName?: string };
    const sa = this.#o.store.get(SA, p.namespace, spec.serviceAccountName ?? 'default');
    if (!sa) throw new Error(`service account ${p.namespace}/${spec.serviceAccountName ?? 'default'} not found`);
    const node = this.#o.store.get(NODE, undefined, spec.nodeName);
    if (!node) throw new Error(`node ${spec.nodeName} not found`);
    if (!isPodCertificateKeyType(p.source.keyType)) throw new Error(`unknown key type "${p.source.keyType}"`);
    const proven = await generateProvenKey(p.source.keyType, p.podUid);
    const created = this.#o.createAsNode(spec.nodeName, PCR, p.namespace, {
      apiVersion: 'certificates.k8s.io/v1beta1',
      kind: 'PodCertificateRequest',
      metadata: { namespace: p.namespace, generateName: 'req-', ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: p.podName, uid: p.podUid }] },
      spec: {
        signerName: p.source.signerName,
        podName: p.podName,
        podUID: p.podUid,
        serviceAccountName: spec.serviceAccountName ?? 'default',
        serviceAccountUID: sa.metadata.uid,
        nodeName: spec.nodeName,
        nodeUID: node.metadata.uid,
        ...(p.source.maxExpirationSeconds !== undefined ? { maxExpirationSeconds: p.source.maxExpirationSeconds } : {}),
        pkixPublicKey: proven.spkiDer.toString('base64'),
        proofOfPossession: proven.proof.toString('base64'),
        ...(p.source.userAnnotations ? { unverifiedUserAnnotations: p.source.userAnnotations } : {}),
      },
    });
    this.#o.logger.debug('pod certificate request created', { namespace: p.namespace, pod: p.podName, request: created.metadata.name });
    return { key: proven.privateKeyPem, name: created.metadata.name! };
  }
}

function keyOf(podUid: string, s: PodCertificateSource): string {
  return `${podUid}/${s.volumeName}/${s.sourceIndex}`;
}
