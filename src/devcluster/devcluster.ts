/**
 * `startDevCluster`: wires the store, token issuer, authenticator, RBAC, REST storage, reviews,
 * faults and (optionally) the simulated kubelet behind one HTTPS listener, seeds the bootstrap
 * objects, and hands back the `DevCluster` handle tests and the CLI use.
 */
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { dirname } from 'node:path';
import { settleWithin, stopOnAbort, type Stoppable } from '../core/long-lived.js';
import { writeFileAtomic } from '../ops/atomic-file.js';
import { ensurePrivateDir } from '../ops/private-dir.js';
import { systemClock, type Clock } from '../core/clock.js';
import { silentLogger, type Logger } from '../core/log.js';
import { ObjectStore } from './store.js';
import { TokenIssuer } from './tokens.js';
import { Authenticator } from './authn.js';
import { RbacAuthorizer, forbiddenMessage, isAuthorizedForSignerName } from './rbac.js';
import type { KubeObject } from './store.js';
import { makeEscalationCheck } from './rbac-escalation.js';
import { RestStorage, type RestOptions } from './rest.js';
import { makeAttestCheck } from './trust-bundle-rules.js';
import { Reviews } from './reviews.js';
import { FaultInjector, type Faults } from './faults.js';
import { SimulatedKubelet } from './kubelet.js';
import { PodCertificateManager } from './pod-certificates.js';
import { systemRng, type Rng } from '../core/rng.js';
import { ApiServer } from './api-server.js';
import { nodeUser } from './node-authorizer.js';
import { makeServingMaterial } from './serving-cert.js';
import { bootstrapObjects } from './bootstrap.js';
import { kubeconfigYaml } from './kubeconfig.js';
import { findByKind, type ResourceType } from './resources.js';
import { DEFAULT_MAX_BODY_BYTES } from './http-io.js';
import { ApiError, badRequest, forbidden } from './status.js';
import { createWatchHub } from './watch.js';
import { RequestLog } from './request-log.js';
import { listenTcp } from '../ops/listen.js';


type ObjectCheck = NonNullable<RestOptions['authorizeObject']>;

/** The write checks RBAC alone does not make (escalation prevention, attest), in order. */
function objectChecks(...checks: readonly ObjectCheck[]): ObjectCheck {
  return (t, obj, user, prev) => {
    for (const check of checks) check(t, obj, user, prev);
  };
}

export const DEFAULT_ISSUER = 'https://kubernetes.default.svc.cluster.local';

export interface DevClusterOptions {
  readonly host?: string;
  /** 0 (default) picks a free port. */
  readonly port?: number;
  readonly logger?: Logger;
  /** Token times (iat/exp, verification) and object timestamps; sockets and watches use real time. */
  readonly clock?: Clock;
  /** Pods with spec.nodeName become Running with a pod IP (default false). */
  readonly simulateKubelet?: boolean;
  /** Service-account token issuer and API audience (default https://kubernetes.default.svc.cluster.local). */
  readonly issuer?: string;
  /** Request bodies above this get 413 (default 3 MiB, as the real server). */
  readonly maxBodyBytes?: number;
  /** TokenRequest expirationSeconds above this are clamped (default 48 h). */
  readonly maxTokenSeconds?: number;
  /** Interval of BOOKMARK events on watches that allow them (default 1000 ms). */
  readonly bookmarkIntervalMs?: number;
  /** Events watches can replay before older resourceVersions are compacted (default 20000). */
  readonly historyLimit?: number;
  /** Reject pods whose service account does not exist, as the ServiceAccount admission plugin does (default false). */
  readonly requireServiceAccounts?: boolean;
  /** Static admin bearer token (default: 32 random bytes, hex). */
  readonly adminToken?: string;
  /**
   * Where the simulated kubelet lays out pod volumes (`<dir>/<pod UID>/volumes/...`): the files
   * of podCertificate projected volumes go there. Unset: requests are still made, no files written.
   */
  readonly podsDir?: string;
  /** Randomness of the simulated kubelet (pod certificate refresh jitter); default Math.random. */
  readonly rng?: Rng;
  /** Aborting it stops the cluster as `stop()` does. */
  readonly signal?: AbortSignal;
}

/** A running devcluster (src/core/long-lived.ts): `stop(deadlineMs)`, or abort `options.signal`. */
export interface DevCluster extends Stoppable {
  readonly url: string;
  readonly caCertPem: string;
  readonly adminToken: string;
  /** The cluster's service-account token issuer (`iss` of every token). */
  readonly issuer: string;
  kubeconfigYaml(user: { token: string; name?: string; namespace?: string }): string;
  /** Writes a kubeconfig (admin by default), creating parent directories, mode 0600. */
  writeKubeconfig(path: string, user?: { token: string; name?: string }): Promise<void>;
  /** Create-or-replace each object as admin (RBAC and other manifests from deploy/). */
  apply(objects: readonly object[]): Promise<void>;
  readonly faults: Faults;
  /** The API requests served so far (method, path, query), newest last, bounded. */
  readonly requestLog: RequestLog;
  /** Current store resourceVersion (for tests that reason about watches). */
  readonly resourceVersion: number;
  /** The simulated kubelet's podCertificate projections of a pod and the state of each (initial, wait, fresh, wait-refresh, denied, failed). */
  podCertificateStates(podUid: string): ReturnType<PodCertificateManager['states']>;
  /** Turns the pod-starting kubelet simulation on or off at runtime. */
  setSimulateKubelet(on: boolean): void;
  /** TCP connections open to the API server right now (tests check that clients leak none). */
  readonly openConnections: number;
  /** TCP connections the API server accepted since it started (tests check that a client reuses its connections). */
  readonly acceptedConnections: number;
  /** `stop()` with its default deadline. */
  close(): Promise<void>;
}

/** How long `stop()` waits by default for the listener to close (watches and connections are cut at once). */
export const DEVCLUSTER_STOP_DEADLINE_MS = 2000;

/** The in-memory parts behind the API, wired together; `address` is where clients reach the server. */
async function assemble(options: DevClusterOptions, clock: Clock, adminToken: string, address: () => string) {
  const host = options.host ?? '127.0.0.1';
  const logger = options.logger ?? silentLogger;
  const issuerUrl = options.issuer ?? DEFAULT_ISSUER;
  const now = () => clock.now();
  const material = await makeServingMaterial({ hosts: [host], nowMs: Date.now() });
  const store = new ObjectStore({ ...(options.historyLimit ? { historyLimit: options.historyLimit } : {}) });
  const issuer = await TokenIssuer.create({ issuer: issuerUrl, clock });
  const authn = new Authenticator({ adminToken, issuer, store, apiAudiences: [issuerUrl] });
  const rbac = new RbacAuthorizer(store);
  let kubelet: SimulatedKubelet | undefined;
  const rest = new RestStorage({
    store,
    now,
    gracefulPodDeletion: () => kubelet?.enabled ?? false,
    rootCaPem: material.caCertPem,
    requireServiceAccounts: options.requireServiceAccounts ?? false,
    authorizeObject: objectChecks(makeEscalationCheck({ store, rbac }), makeAttestCheck(rbac)),
    maySign: (user, signerName) => isAuthorizedForSignerName(rbac, user, 'sign', signerName),
  });
  const podCertificates = new PodCertificateManager({
    store, clock, logger, rng: options.rng ?? systemRng, podsDir: options.podsDir,
    createAsNode: nodeCreator(rbac, rest),
    onIssued: (ns, name) => kubelet?.retry(ns, name),
  });
  kubelet = new SimulatedKubelet({ store, now, podCertificates });
  const reviews = new Reviews({ store, issuer, authn, rbac, now, maxTokenSeconds: options.maxTokenSeconds ?? 48 * 3600 });
  const hub = createWatchHub(options.bookmarkIntervalMs ?? 1000);
  const faults = new FaultInjector({ store, watches: hub });
  const requestLog = new RequestLog();
  const api = new ApiServer({
    store, authn, rbac, rest, reviews, issuer, faults, hub, requestLog, logger,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    now,
    serverAddress: address,
    publicUrl: () => `https://${address()}`,
  });
  return { host, logger, issuerUrl, material, store, kubelet, podCertificates, rest, hub, faults, requestLog, api };
}

/** How the simulated kubelet creates objects (PodCertificateRequests, events): as its node, through authorization and admission. */
function nodeCreator(rbac: RbacAuthorizer, rest: RestStorage): (node: string, t: ResourceType, ns: string, body: Record<string, unknown>) => KubeObject {
  return (node, t, ns, body) => {
    const user = nodeUser(node);
    const attrs = { user, resourceRequest: true, verb: 'create', apiGroup: t.group, resource: t.plural, namespace: ns } as const;
    if (!rbac.authorize(attrs).allowed) throw forbidden(forbiddenMessage(attrs), { ...(t.group ? { group: t.group } : {}), kind: t.plural });
    return rest.create(t, ns, body, new URLSearchParams(), user).body as KubeObject;
  };
}

/** Create-or-replace of one object as the admin (the bootstrap objects, `apply`). */
function adminApplier(store: ObjectStore, rest: RestStorage): (o: object) => void {
  const adminUser = { username: 'devcluster-admin', groups: ['system:masters', 'system:authenticated'] };
  return (o) => {
    const obj = o as { apiVersion?: string; kind?: string; metadata?: { name?: string; namespace?: string } };
    const t = findByKind(obj.apiVersion ?? '', obj.kind ?? '');
    if (!t) throw badRequest(`no kind "${obj.kind}" is registered for version "${obj.apiVersion}"`);
    const name = obj.metadata?.name ?? '';
    const ns = t.namespaced ? (obj.metadata?.namespace ?? 'default') : undefined;
    const q = new URLSearchParams();
    if (name !== '' && store.get(t, ns, name)) {
      const { resourceVersion: _rv, ...meta } = (obj.metadata ?? {}) as Record<string, unknown>;
      rest.update(t, ns, name, { ...obj, metadata: meta }, undefined, q);
    } else rest.create(t, ns, obj, q, adminUser);
  };
}

/** The HTTPS listener; `close()` stops it and destroys the connections still open. */
async function serveHttps(
  material: { readonly keyPem: string; readonly certPem: string },
  listener: ApiServer['listener'],
  host: string,
  port: number,
): Promise<{ readonly port: number; readonly openConnections: number; readonly acceptedConnections: number; close(): Promise<void> }> {
  const server: Server = createServer({ key: material.keyPem, cert: material.certPem, keepAlive: true }, listener);
  const sockets = new Set<Socket>();
  let accepted = 0;
  server.on('connection', (s: Socket) => {
    accepted += 1;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('tlsClientError', () => undefined);
  const bound = await listenTcp(server, port, host);
  return {
    port: bound,
    get openConnections() {
      return sockets.size;
    },
    get acceptedConnections() {
      return accepted;
    },
    close() {
      const done = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      return done;
    },
  };
}

export async function startDevCluster(options: DevClusterOptions = {}): Promise<DevCluster> {
  const clock = options.clock ?? systemClock;
  const adminToken = options.adminToken ?? randomBytes(32).toString('hex');
  let address = '';
  const { host, logger, issuerUrl, material, store, kubelet, podCertificates, rest, hub, faults, requestLog, api } = await assemble(options, clock, adminToken, () => address);
  const applyOne = adminApplier(store, rest);
  for (const o of bootstrapObjects()) applyOne(o);
  if (options.simulateKubelet) kubelet.start();

  const server = await serveHttps(material, api.listener, host, options.port ?? 0);
  const urlHost = host.includes(':') ? `[${host}]` : host;
  address = `${urlHost}:${server.port}`;
  const url = `https://${address}`;
  logger.info('devcluster listening', { url, issuer: issuerUrl });

  let closed: Promise<void> | undefined;
  const stop = async (deadlineMs = DEVCLUSTER_STOP_DEADLINE_MS) => {
    closed ??= (async () => {
      kubelet.stop();
      for (const w of hub.open) w.destroy();
      await server.close();
    })();
    await settleWithin(closed, deadlineMs);
  };
  stopOnAbort(options.signal, () => stop());
  return {
    url,
    caCertPem: material.caCertPem,
    adminToken,
    issuer: issuerUrl,
    faults,
    requestLog,
    get resourceVersion() {
      return store.resourceVersion;
    },
    kubeconfigYaml: (user) =>
      kubeconfigYaml({ server: url, caCertPem: material.caCertPem, token: user.token, ...(user.name ? { userName: user.name } : {}), ...(user.namespace ? { namespace: user.namespace } : {}) }),
    async writeKubeconfig(path, user) {
      const text = kubeconfigYaml({ server: url, caCertPem: material.caCertPem, token: user?.token ?? adminToken, userName: user?.name ?? (user ? 'devcluster-user' : 'devcluster-admin') });
      await ensurePrivateDir(dirname(path));
      await writeFileAtomic(path, text, { mode: 0o600 });
    },
    async apply(objects) {
      for (const o of objects) {
        try {
          applyOne(o);
        } catch (err) {
          if (err instanceof ApiError) throw new Error(`apply ${(o as { kind?: string }).kind ?? '?'} ${(o as { metadata?: { name?: string } }).metadata?.name ?? '?'}: ${err.message}`, { cause: err });
          throw err;
        }
      }
    },
    get openConnections() {
      return server.openConnections;
    },
    get acceptedConnections() {
      return server.acceptedConnections;
    },
    podCertificateStates: (podUid) => podCertificates.states(podUid),
    setSimulateKubelet(on) {
      if (on) kubelet.start();
      else kubelet.stop();
    },
    stop,
    close: () => stop(),
  };
}
