/**
 * A stand-in for the kubelets of a cluster, for local runs: a pod bound to a node
 * (`spec.nodeName`) moves from Pending to Running on the next turn, with a pod IP from
 * 10.244.0.0/16 (the node's IP for hostNetwork pods), host IP, start time, Ready conditions and
 * container statuses. Nothing else: no containers, no probes. A pod with podCertificate
 * projected volumes starts only once each has its credentials (pod-certificates.ts), as a
 * kubelet holds a pod in ContainerCreating until its volumes are set up.
 */
import type { ObjectStore, KubeObject } from './store.js';
import { findResource } from './resources.js';
import { isoSeconds } from './admission.js';
import type { PodCertificateManager } from './pod-certificates.js';

const POD = findResource('', 'v1', 'pods')!;
const NODE = findResource('', 'v1', 'nodes')!;

export class SimulatedKubelet {
  readonly #store: ObjectStore;
  readonly #now: () => number;
  #nextPodIp = 2;
  readonly #nodeIps = new Map<string, string>();
  #unsubscribe: (() => void) | undefined;
  #enabled = false;
  readonly #certificates: PodCertificateManager | undefined;

  constructor(options: { store: ObjectStore; now: () => number; podCertificates?: PodCertificateManager }) {
    this.#store = options.store;
    this.#now = options.now;
    this.#certificates = options.podCertificates;
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  start(): void {
    if (this.#enabled) return;
    this.#enabled = true;
    this.#unsubscribe = this.#store.subscribe((e) => {
      if (e.key !== 'pods' || e.type === 'DELETED') return;
      if (this.#wantsStart(e.object)) {
        const { namespace, name, uid } = e.object.metadata;
        setImmediate(() => this.#run(namespace, name!, uid!));
      }
    });
    for (const p of this.#store.list(POD)) {
      if (this.#wantsStart(p)) setImmediate(() => this.#run(p.metadata.namespace, p.metadata.name!, p.metadata.uid!));
    }
    this.#certificates?.start();
  }

  stop(): void {
    this.#unsubscribe?.();
    this.#certificates?.stop();
    this.#enabled = false;
  }

  /** Tries to start a pod again (its pod certificates were just issued). */
  retry(namespace: string, name: string): void {
    const p = this.#store.get(POD, namespace, name);
    if (p && this.#wantsStart(p)) setImmediate(() => this.#run(namespace, name, p.metadata.uid!));
  }

  #wantsStart(p: KubeObject): boolean {
    const spec = p.spec as { nodeName?: string } | undefined;
    const status = p.status as { phase?: string } | undefined;
    return Boolean(spec?.nodeName) && status?.phase === 'Pending' && p.metadata.deletionTimestamp === undefined;
  }

  nodeIp(nodeName: string): string {
    const node = this.#store.get(NODE, undefined, nodeName);
    const addresses = (node?.status as { addresses?: Array<{ type?: string; address?: string }> } | undefined)?.addresses ?? [];
    const internal = addresses.find((a) => a.type === 'InternalIP')?.address;
    if (internal) return internal;
    let ip = this.#nodeIps.get(nodeName);
    if (!ip) {
      ip = `172.18.0.${2 + this.#nodeIps.size}`;
      this.#nodeIps.set(nodeName, ip);
    }
    return ip;
  }

  #allocatePodIp(): string {
    const n = this.#nextPodIp++;
    return `10.244.${Math.floor(n / 254) % 256}.${(n % 254) + 1}`;
  }

  #run(namespace: string | undefined, name: string, uid: string): void {
    if (!this.#enabled) return;
    const pod = this.#store.get(POD, namespace, name);
    if (!pod || pod.metadata.uid !== uid || !this.#wantsStart(pod)) return;
    if (this.#certificates && !this.#certificates.ready(pod)) return;
    const spec = pod.spec as { nodeName: string; hostNetwork?: boolean; containers?: Array<{ name?: string; image?: string }> };
    const hostIp = this.nodeIp(spec.nodeName);
    const podIp = spec.hostNetwork ? hostIp : this.#allocatePodIp();
    const now = isoSeconds(this.#now());
    const cond = (type: string) => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: now });
    pod.status = {
      phase: 'Running',
      conditions: [cond('PodReadyToStartContainers'), cond('Initialized'), cond('Ready'), cond('ContainersReady'), cond('PodScheduled')],
      hostIP: hostIp,
      hostIPs: [{ ip: hostIp }],
      podIP: podIp,
      podIPs: [{ ip: podIp }],
      startTime: now,
      containerStatuses: (spec.containers ?? []).map((c) => ({
        name: c.name,
        state: { running: { startedAt: now } },
        lastState: {},
        ready: true,
        restartCount: 0,
        image: c.image,
        imageID: '',
        containerID: `containerd://${uid.replace(/-/g, '')}${String(c.name).length}`,
        started: true,
      })),
      qosClass: 'BestEffort',
    };
    this.#store.update(POD, pod);
  }
}
