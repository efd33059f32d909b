/**
 * The local stack's sample clients of the broker's Workload API and Istio CA front (the Broker
 * API's is the consumer in stack-parts.ts), each on a real socket:
 *
 * - Workload API: a process of its own (workload-sample-client.ts) moved into the cgroup of pod
 *   shop/cart-0 (kube-cgroups.ts, as kubelet's systemd driver and containerd name it) before it opens a `FetchX509SVID` stream on the workload
 *   socket; the broker attests it from the kernel. Without root or cgroup v2 it is not run and
 *   the view says why.
 * - Istio CA front: what released ztunnel does — a token bound to its pod on node-1 (audience
 *   istio-ca), `CreateCertificate` over TLS to the front for its own SVID and, with
 *   `ImpersonatedIdentity`, for a node pod's; kept fresh by a certificate manager (half-life).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { CoreV1Api } from '@kubernetes/client-node';
import { systemClock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { systemRng } from '../core/rng.js';
import { Secret } from '../core/secret.js';
import type { Broker } from '../broker/broker.js';
import { IstioCaClient } from '../broker/adapters/ca-client.js';
import { CertManager } from '../broker/cache/cert-manager.js';
import type { CaServer } from '../ca/index.js';
import { CA_TOKEN_AUDIENCE, DEFAULT_CLUSTER_ID } from '../protocol/istio-ca.js';
import { KubeletCgroups, kubeCgroupsProblem, podPath } from './kube-cgroups.js';
import { saToken } from './stack-parts.js';
import { emptyView, received, type SampleView } from './stack-sample-view.js';
import type { WorkloadSampleLine } from './workload-sample-client.js';

export interface WorkloadSample {
  /** How the client runs (`pid N in the cgroup of pod shop/cart-0`), or why it does not. */
  readonly status: string;
  readonly running: boolean;
  /** By SPIFFE ID, what its FetchX509SVID stream delivered. */
  readonly views: ReadonlyMap<string, SampleView>;
  close(): Promise<void>;
}

const WORKLOAD_CLIENT = fileURLToPath(new URL('./workload-sample-client.js', import.meta.url));

/** Why the sample client cannot be placed in a pod cgroup here (the view shows it), or undefined. */
export function podCgroupProblem(hierarchy = KubeletCgroups.v2()): string | undefined {
  const why = kubeCgroupsProblem(hierarchy, 'cgroup v2');
  if (why === undefined) return undefined;
  return `attestation places the client in a pod cgroup: ${why}${process.getuid?.() === 0 ? '' : ' (run npm start as root to see it)'}`;
}

/** Starts the Workload API sample client in the cgroup of pod `pod` (`namespace/name`, its uid). */
export async function startWorkloadSample(socketPath: string, pod: { readonly key: string; readonly uid: string }, logger: Logger): Promise<WorkloadSample> {
  const views = new Map<string, SampleView>();
  const notRun = (why: string): WorkloadSample => ({ status: `not run: ${why}`, running: false, views, close: async () => undefined });
  const cgroups = KubeletCgroups.v2();
  const problem = podCgroupProblem(cgroups);
  if (problem !== undefined || cgroups === undefined) return notRun(problem ?? 'no cgroup v2 hierarchy');
  const path = podPath({ driver: 'systemd', qos: 'besteffort', uid: pod.uid, container: { runtime: 'containerd', id: randomBytes(32).toString('hex') } });
  const child: ChildProcess = spawn(process.execPath, [WORKLOAD_CLIENT, socketPath], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async () => {
    child.stdin?.end();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    try {
      cgroups.cleanup();
    } catch (err) {
      logger.warn('Workload API sample client: pod cgroup not removed', { error: describeError(err) });
    }
  };
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    cgroups.place(child.pid!, path);
  } catch (err) {
    await close();
    return notRun(`cannot place the client in the pod cgroup (${describeError(err)})`);
  }
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let line: WorkloadSampleLine;
    try {
      line = JSON.parse(text) as WorkloadSampleLine;
    } catch {
      return;
    }
    if ('error' in line) {
      for (const v of views.values()) v.problem = line.error;
      if (views.size === 0) views.set('(no identity)', { ...emptyView(), problem: line.error });
      logger.warn('Workload API sample client: stream ended', { error: line.error });
      return;
    }
    for (const s of line.svids) {
      let view = views.get(s.spiffeId);
      if (!view) views.set(s.spiffeId, (view = emptyView()));
      received(view, s.serial, s.notAfter, Date.now());
    }
  });
  // Placed: now it may connect.
  child.stdin!.write('go\n');
  return { status: `pid ${child.pid} in the cgroup of pod ${pod.key} (/${path})`, running: true, views, close };
}

export interface IstioCaSample {
  /** The caller: ztunnel's account and the pod its token is bound to. */
  readonly caller: string;
  /** By SPIFFE ID: ztunnel's own SVID and one impersonated node pod's, as the front issued them. */
  readonly views: ReadonlyMap<string, SampleView>;
  close(): void;
}

export interface IstioCaSampleInputs {
  readonly core: CoreV1Api;
  readonly ca: CaServer;
  readonly broker: Broker;
  /** ztunnel's pod on the node (its token is bound to it). */
  readonly ztunnelPod: { readonly namespace: string; readonly name: string; readonly uid: string; readonly serviceAccount: string };
  readonly ownIdentity: string;
  /** A node pod's identity to ask for with ImpersonatedIdentity. */
  readonly impersonated: string;
  readonly certTtlSeconds: number;
  readonly logger: Logger;
}

/** ztunnel as released: its pod-bound token, CreateCertificate through the broker's Istio CA front. */
export function startIstioCaSample(i: IstioCaSampleInputs): IstioCaSample {
  const p = i.ztunnelPod;
  let token: { readonly value: Secret<string>; readonly renewAt: number } | undefined;
  const tokens = {
    async token() {
      if (token && Date.now() < token.renewAt) return token.value;
      token = { value: new Secret(await saToken(i.core, p.namespace, p.serviceAccount, CA_TOKEN_AUDIENCE, 3600, p)), renewAt: Date.now() + 1_800_000 };
      return token.value;
    },
  };
  const client = (impersonate: boolean) =>
    new IstioCaClient({
      address: `127.0.0.1:${i.broker.istioCaFrontPort}`,
      caRootsPem: i.ca.rootsPem(),
      tlsServerName: 'localhost',
      tokens,
      clusterId: DEFAULT_CLUSTER_ID,
      certTtlSeconds: i.certTtlSeconds,
      impersonate,
    });
  const views = new Map<string, SampleView>();
  const parts: Array<{ readonly ca: IstioCaClient; readonly certs: CertManager }> = [];
  for (const [identity, impersonate] of [[i.ownIdentity, false], [i.impersonated, true]] as const) {
    const ca = client(impersonate);
    const view = emptyView();
    views.set(identity, view);
    const certs = new CertManager({
      ca,
      clock: systemClock,
      rng: systemRng,
      logger: i.logger,
      maxConcurrentFetches: 1,
      observer: { fetchFailed: (_id, err) => (view.problem = describeError(err)) },
    });
    // Retained first: a subscription to an identity the manager does not hold is told 'forgotten' at once.
    certs.retain(identity, 'istio-ca-sample', 'realtime');
    certs.subscribe(identity, (ev) => {
      if (ev.type === 'updated') received(view, ev.cert.serial, ev.cert.notAfter, Date.now());
    });
    parts.push({ ca, certs });
  }
  return {
    caller: `${p.namespace}/${p.serviceAccount} (token bound to pod ${p.name})`,
    views,
    close() {
      for (const part of parts) {
        part.certs.stop();
        part.ca.close();
      }
    },
  };
}
