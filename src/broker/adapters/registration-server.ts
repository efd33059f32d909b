/**
 * Pod registrations from the CNI plugin: HTTP over a Unix socket, `POST /cmdadd` with Istio's
 * body `{"Netns","PodName","PodNamespace","IPs"}` (so Istio's own plugin can register with us).
 * The broker looks the pod up itself (the plugin's word is not trusted for the service
 * account), and an eligible pod's certificate fetch starts at once, before its containers run.
 *
 * Answers: 200 registered (idempotent) or deliberately ignored (host network, terminating,
 * finished: JSON body says why, and the pod still starts); 400 malformed body or a pod of
 * another node; 404 unknown pod; 405/404 for other methods/paths; 413 oversized body;
 * 503 when the lookup fails or does not finish within `lookupTimeoutMs` (the plugin retries
 * the ADD). The lookup is aborted — its API connection closed — at that deadline, when the
 * registering client goes away first, and when the server closes: an API server that never
 * answers holds no socket per abandoned registration.
 *
 * `POST /v1/ambient-add` (src/protocol/cni-ambient-add.ts, when `ambient` is given) is certbroker's
 * one-round-trip ADD: the broker decides "ambient?" from its own watches (`ambient`), with the
 * plugin's enablement selectors, and registers the pod as `/cmdadd` would, without an API call;
 * a pod it has not seen yet is answered `{"known":false}` (the plugin then asks the API server).
 * `POST /v1/sidecar-pod` (src/protocol/cni-sidecar-pod.ts, when `sidecar` is given) answers the
 * fields the sidecar rules read from the node pod watch; 404 for a pod not watched or of another UID.
 */
import { chmodSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { deadline, isDeadlineError } from '../../core/deadline.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import {
  CNI_ADD_EVENT_METHOD,
  CNI_ADD_EVENT_PATH,
  CNI_ADD_EVENT_RETRY_STATUS,
  decodeCniAddEvent,
  type CniPluginAddEvent,
} from '../../protocol/cni-event.js';
import { AMBIENT_ADD_METHOD, AMBIENT_ADD_PATH, decodeAmbientAddRequest, type AmbientAddAnswer } from '../../protocol/cni-ambient-add.js';
import { SIDECAR_POD_METHOD, SIDECAR_POD_PATH, decodeSidecarPodRequest } from '../../protocol/cni-sidecar-pod.js';
import { decodeEnablementSelectors, isAmbientPod, type EnablementSelector } from '../../core/ambient-enablement.js';
import { BrokerError } from '../errors.js';
import type { NodePods, PodEligibility, PodFacts } from '../cache/node-pods.js';
import { prepareSocketPath } from './unix-socket.js';

const MAX_BODY_BYTES = 64 * 1024;

/** Finds a pod by namespace/name (undefined when it does not exist); the Kubernetes adapter. */
export type PodLookup = (namespace: string, name: string, signal: AbortSignal) => Promise<PodFacts | undefined>;

/** What the broker's watches say about a pod of this node: its facts and what the ambient decision reads. */
export interface AmbientPodView {
  readonly facts: PodFacts;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** Labels of the pod's namespace. */
  readonly namespaceLabels: Readonly<Record<string, string>>;
}

/** The watch-backed view (undefined: the pod or its namespace is not in the caches yet). */
export type AmbientLookup = (namespace: string, name: string) => AmbientPodView | undefined;

/** A watched pod's UID and its sidecar fields (src/protocol/cni-sidecar-pod.ts); undefined: not watched. */
export type SidecarPodLookup = (namespace: string, name: string) => { readonly uid: string; readonly fields: object } | undefined;

export interface RegistrationObserver {
  registered?(outcome: PodEligibility | 'not-found' | 'invalid' | 'error'): void;
}

export interface RegistrationServerOptions {
  readonly socketPath: string;
  readonly pods: NodePods;
  readonly lookup: PodLookup;
  readonly logger: Logger;
  readonly observer?: RegistrationObserver;
  /** Serves `POST /v1/ambient-add` from these watches (absent: that path is 404, as on older brokers). */
  readonly ambient?: AmbientLookup;
  /** Serves `POST /v1/sidecar-pod` from the node pod watch (absent: that path is 404). */
  readonly sidecar?: SidecarPodLookup;
  /** Per-request lookup deadline. Default 5000. */
  readonly lookupTimeoutMs?: number;
}

export interface RegistrationServer {
  close(): Promise<void>;
}

/** Decodes the body (src/protocol/cni-event.ts); throws ERR_REGISTRATION_INVALID naming the problem. */
export function parseCniAddEvent(body: string): CniPluginAddEvent {
  const decoded = decodeCniAddEvent(body);
  if (decoded.ok) return decoded.event;
  throw new BrokerError('ERR_REGISTRATION_INVALID', `invalid CNI add event: ${decoded.problem}`, {
    status: 'invalid-argument',
    publicMessage: decoded.problem,
  });
}

export async function startRegistrationServer(options: RegistrationServerOptions): Promise<RegistrationServer> {
  const { socketPath, logger } = options;
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === AMBIENT_ADD_PATH && options.ambient) return handleAmbientAdd(options, options.ambient, req, res);
    if (path === SIDECAR_POD_PATH && options.sidecar) return handleSidecarPod(options.sidecar, req, res);
    if (path !== CNI_ADD_EVENT_PATH) return reply(res, 404, 'not found\n');
    if (req.method !== CNI_ADD_EVENT_METHOD) return reply(res, 405, 'method not allowed\n', { allow: CNI_ADD_EVENT_METHOD });
    const body = await readBody(req);
    if (body === undefined) return reply(res, 413, 'body too large\n');
    let event: CniPluginAddEvent;
    try {
      event = parseCniAddEvent(body);
    } catch (err) {
      options.observer?.registered?.('invalid');
      return reply(res, 400, `${err instanceof BrokerError ? err.publicMessage : 'invalid body'}\n`);
    }
    const ns = event.PodNamespace;
    const name = event.PodName;
    const looked = await lookupFor(options, res, ns, name);
    if (looked.outcome === 'gone') {
      options.observer?.registered?.('error');
      logger.info('CNI registration abandoned by its client; pod lookup cancelled', { pod: `${ns}/${name}` });
      return;
    }
    if (looked.outcome === 'failed') {
      options.observer?.registered?.('error');
      logger.warn('pod lookup for a CNI registration failed', { pod: `${ns}/${name}`, err: describeError(looked.err) });
      const why = looked.timedOut ? `pod lookup timed out after ${options.lookupTimeoutMs ?? DEFAULT_LOOKUP_TIMEOUT_MS} ms, retry\n` : 'pod lookup failed, retry\n';
      return reply(res, CNI_ADD_EVENT_RETRY_STATUS, why);
    }
    const facts = looked.facts;
    if (!facts) {
      options.observer?.registered?.('not-found');
      return reply(res, 404, `pod ${ns}/${name} not found\n`);
    }
    const outcome = options.pods.upsert(facts);
    options.observer?.registered?.(outcome);
    logger.info('pod registered by CNI', { pod: `${ns}/${name}`, uid: facts.uid, outcome, netns: event.Netns });
    if (outcome === 'other-node') return reply(res, 400, `pod ${ns}/${name} does not run on this node\n`);
    const json = JSON.stringify(
      outcome === 'eligible'
        ? { registered: true, identity: options.pods.byUid(facts.uid)?.identity }
        : { registered: false, reason: outcome },
    );
    return reply(res, 200, json + '\n', { 'content-type': 'application/json' });
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      logger.error('registration handler failed', { err: describeError(err) });
      if (!res.headersSent) reply(res, 500, 'internal error\n');
      else res.destroy();
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 15_000;
  prepareSocketPath(socketPath);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(socketPath, 0o600);
  logger.info('CNI registration socket listening', { socket: socketPath });
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          rmSync(socketPath, { force: true });
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}

const DEFAULT_LOOKUP_TIMEOUT_MS = 5000;

async function handleAmbientAdd(options: RegistrationServerOptions, lookup: AmbientLookup, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== AMBIENT_ADD_METHOD) return reply(res, 405, 'method not allowed\n', { allow: AMBIENT_ADD_METHOD });
  const body = await readBody(req);
  if (body === undefined) return reply(res, 413, 'body too large\n');
  const request = decodeAmbientAddRequest(body);
  let event: CniPluginAddEvent;
  let selectors: readonly EnablementSelector[];
  try {
    if (!request.ok) throw new BrokerError('ERR_REGISTRATION_INVALID', `invalid ambient add: ${request.problem}`, { status: 'invalid-argument', publicMessage: request.problem });
    event = parseCniAddEvent(request.eventJson);
    selectors = decodeSelectors(request.selectors);
  } catch (err) {
    options.observer?.registered?.('invalid');
    return reply(res, 400, `${err instanceof BrokerError ? err.publicMessage : 'invalid body'}\n`);
  }
  const answer = (a: AmbientAddAnswer) => reply(res, 200, JSON.stringify(a) + '\n', { 'content-type': 'application/json' });
  const pod = `${event.PodNamespace}/${event.PodName}`;
  const view = lookup(event.PodNamespace, event.PodName);
  // Not seen yet, or the cache still holds an earlier pod of that name: the plugin asks the API server.
  if (!view || (request.podUid !== '' && view.facts.uid !== request.podUid)) return answer({ known: false });
  const ambient = isAmbientPod(
    { podLabels: view.labels, podAnnotations: view.annotations, hostNetwork: view.facts.hostNetwork, namespaceLabels: view.namespaceLabels },
    selectors,
  );
  if (!ambient) return answer({ known: true, ambient: false });
  const outcome = options.pods.upsert(view.facts);
  if (outcome === 'other-node') return answer({ known: false });
  options.observer?.registered?.(outcome);
  options.logger.info('pod registered by CNI', { pod, uid: view.facts.uid, outcome, netns: event.Netns, from: 'watch' });
  return answer(outcome === 'eligible' ? { known: true, ambient: true, registered: true } : { known: true, ambient: true, registered: false, reason: outcome });
}

async function handleSidecarPod(lookup: SidecarPodLookup, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== SIDECAR_POD_METHOD) return reply(res, 405, 'method not allowed\n', { allow: SIDECAR_POD_METHOD });
  const body = await readBody(req);
  if (body === undefined) return reply(res, 413, 'body too large\n');
  const decoded = decodeSidecarPodRequest(body);
  if (!decoded.ok) return reply(res, 400, `${decoded.problem}\n`);
  const { namespace, name, uid } = decoded.request;
  const found = lookup(namespace, name);
  // Never the fields of an earlier pod of that name: the plugin then asks the API server.
  if (!found || found.uid !== uid) return reply(res, 404, `pod ${namespace}/${name} (uid ${uid}) is not watched\n`);
  return reply(res, 200, JSON.stringify(found.fields) + '\n', { 'content-type': 'application/json' });
}

function decodeSelectors(raw: unknown): readonly EnablementSelector[] {
  return decodeEnablementSelectors(raw, (why) => {
    throw new BrokerError('ERR_REGISTRATION_INVALID', `invalid ambient add: ${why}`, { status: 'invalid-argument', publicMessage: why });
  });
}

type LookupResult =
  | { readonly outcome: 'found'; readonly facts: PodFacts | undefined }
  | { readonly outcome: 'gone' }
  | { readonly outcome: 'failed'; readonly err: unknown; readonly timedOut: boolean };

/**
 * The registration's pod lookup, aborted at `lookupTimeoutMs` or as soon as the registering
 * client goes away (`res` closes before it was answered): its API connection closes with it.
 */
async function lookupFor(options: RegistrationServerOptions, res: ServerResponse, ns: string, name: string): Promise<LookupResult> {
  const gone = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) gone.abort();
  };
  res.once('close', onClose);
  const limit = deadline(options.lookupTimeoutMs ?? DEFAULT_LOOKUP_TIMEOUT_MS, { what: `pod lookup for ${ns}/${name}`, parent: gone.signal });
  try {
    return { outcome: 'found', facts: await options.lookup(ns, name, limit.signal) };
  } catch (err) {
    if (gone.signal.aborted) return { outcome: 'gone' };
    const reason: unknown = limit.signal.aborted ? limit.signal.reason : err;
    return { outcome: 'failed', err: reason, timedOut: isDeadlineError(reason) };
  } finally {
    limit.dispose();
    res.off('close', onClose);
  }
}

function reply(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'text/plain', ...headers }).end(body);
}

/** The body as text, or undefined when it exceeds the limit. */
function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) tooLarge = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(tooLarge ? undefined : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
