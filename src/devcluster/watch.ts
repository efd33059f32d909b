/**
 * Watch streams: newline-delimited JSON events on a chunked 200 response, started from a
 * resourceVersion (replaying history), from "now" with synthetic ADDED events for the current
 * state, or answered with an ERROR 410 "too old resource version" event when history was
 * compacted past it. Selectors apply to both the old and the new state, so an object that
 * stops matching is DELETED for this watcher and one that starts matching is ADDED, as the
 * real watch cache does. BOOKMARKs when asked for; every open watch can be dropped on demand,
 * or silenced (fault injection): it stays open and sends nothing more, not even the end at
 * timeoutSeconds, as a hung replica or proxy would.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ObjectStore, KubeObject, StoreEvent } from './store.js';
import { apiVersionOf, storeKey, type ResourceType } from './resources.js';
import { matchesFields, matchesLabels, type FieldSelector, type LabelSelector } from './selectors.js';
import { badRequest, expired, invalid } from './status.js';
import type { FaultRequest } from './faults.js';

/** Unsent watch data above which a slow consumer's stream is closed. */
export const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

export interface WatchRequest {
  readonly type: ResourceType;
  readonly namespace: string | undefined;
  readonly labels: LabelSelector;
  readonly fields: FieldSelector;
  readonly resourceVersion: string | undefined;
  readonly allowBookmarks: boolean;
  /** Watch-list (`sendInitialEvents=true`): current state as ADDED, then an initial-events-end BOOKMARK. */
  readonly sendInitialEvents?: boolean;
  readonly timeoutSeconds: number | undefined;
  /** Renders each event's object (e.g. as a one-row Table); default: the object with its kind. */
  readonly render?: (o: KubeObject) => unknown;
  /** The request as fault matching sees it. */
  readonly fault?: FaultRequest;
  /** Accepted, then silent from the start (fault injection). */
  readonly silent?: boolean;
}

export interface WatchHub {
  /** Open watch connections; `drop` destroys their sockets, as a dying API server would. */
  readonly open: Set<ServerResponse>;
  readonly bookmarkIntervalMs: number;
  /** The request of each open watch (for fault matching). */
  readonly requests: WeakMap<object, FaultRequest>;
  /** Open watches that send nothing any more. */
  readonly silenced: WeakSet<object>;
}

export function createWatchHub(bookmarkIntervalMs: number): WatchHub {
  return { open: new Set<ServerResponse>(), bookmarkIntervalMs, requests: new WeakMap(), silenced: new WeakSet() };
}

function withKind(t: ResourceType, o: KubeObject): KubeObject {
  return { ...o, apiVersion: apiVersionOf(t), kind: t.kind };
}

export function serveWatch(req: IncomingMessage, res: ServerResponse, store: ObjectStore, hub: WatchHub, w: WatchRequest): void {
  const matches = (o: KubeObject | undefined): boolean =>
    o !== undefined &&
    (w.namespace === undefined || o.metadata.namespace === w.namespace) &&
    matchesLabels(w.labels, o.metadata.labels) &&
    matchesFields(w.fields, o);

  if (w.sendInitialEvents && !w.allowBookmarks) {
    throw invalid('ListOptions', 'meta.k8s.io', '', [{ field: 'allowWatchBookmarks', reason: 'FieldValueRequired', message: 'Required value: allowWatchBookmarks must be set to true when sendInitialEvents is specified' }]);
  }
  let startRv: number | undefined;
  if (!w.sendInitialEvents && w.resourceVersion !== undefined && w.resourceVersion !== '' && w.resourceVersion !== '0') {
    if (!/^\d+$/.test(w.resourceVersion)) throw badRequest(`invalid resource version: ${JSON.stringify(w.resourceVersion)}`);
    startRv = Number(w.resourceVersion);
  }

  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private', 'transfer-encoding': 'chunked' });
  res.flushHeaders();
  if (w.silent) hub.silenced.add(res);
  if (w.fault) hub.requests.set(res, w.fault);
  const silenced = () => hub.silenced.has(res);
  const render = w.render ?? ((o: KubeObject) => o);
  const send = (type: string, object: unknown): void => {
    if (res.destroyed || res.writableEnded || silenced()) return;
    // A consumer that stops reading is cut off, as the real watch cache does, instead of
    // buffering without bound.
    if (res.writableLength > MAX_BUFFERED_BYTES) {
      res.destroy();
      return;
    }
    res.write(JSON.stringify({ type, object }) + '\n');
  };

  const translate = (e: StoreEvent): void => {
    const was = matches(e.prev);
    const is = e.type !== 'DELETED' && matches(e.object);
    if (e.type === 'ADDED' && is) send('ADDED', render(withKind(w.type, e.object)));
    else if (e.type === 'MODIFIED' && was && is) send('MODIFIED', render(withKind(w.type, e.object)));
    else if (e.type === 'MODIFIED' && !was && is) send('ADDED', render(withKind(w.type, e.object)));
    else if (e.type === 'MODIFIED' && was && !is) {
      const gone = structuredClone(e.prev!);
      gone.metadata.resourceVersion = String(e.rv);
      send('DELETED', render(withKind(w.type, gone)));
    } else if (e.type === 'DELETED' && was) send('DELETED', render(withKind(w.type, e.object)));
  };

  if (startRv === undefined) {
    for (const o of store.list(w.type, w.namespace)) if (matches(o)) send('ADDED', render(withKind(w.type, o)));
    if (w.sendInitialEvents) {
      send('BOOKMARK', {
        kind: w.type.kind,
        apiVersion: apiVersionOf(w.type),
        metadata: { resourceVersion: String(store.resourceVersion), annotations: { 'k8s.io/initial-events-end': 'true' } },
      });
    }
  } else {
    const past = store.eventsSince(w.type, startRv);
    if (past === 'expired' && !silenced()) {
      const err = expired(`too old resource version: ${startRv} (${store.compactedResourceVersion})`);
      send('ERROR', err.toStatus());
      res.end();
      return;
    }
    if (past !== 'expired') for (const e of past) translate(e);
  }

  const key = storeKey(w.type);
  const unsubscribe = store.subscribe((e) => {
    if (e.key === key) translate(e);
  });
  hub.open.add(res);
  const timers: NodeJS.Timeout[] = [];
  if (w.allowBookmarks) {
    const t = setInterval(() => {
      send('BOOKMARK', { kind: w.type.kind, apiVersion: apiVersionOf(w.type), metadata: { resourceVersion: String(store.resourceVersion) } });
    }, hub.bookmarkIntervalMs);
    t.unref();
    timers.push(t);
  }
  if (w.timeoutSeconds !== undefined && w.timeoutSeconds > 0) {
    // A silent watch is never ended by the server: only the client can close it.
    const t = setTimeout(() => {
      if (!silenced()) res.end();
    }, w.timeoutSeconds * 1000);
    t.unref();
    timers.push(t);
  }
  const cleanup = (): void => {
    unsubscribe();
    hub.open.delete(res);
    for (const t of timers) clearTimeout(t);
  };
  res.on('close', cleanup);
  req.on('close', cleanup);
}
