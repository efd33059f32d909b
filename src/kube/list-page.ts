/**
 * A paged list (`limit`/`continue`), each page within its own request deadline, over kept-alive
 * connections (at most two TLS handshakes per list — the page being read and the one ahead — not one
 * per page). One page ahead: a reader that can tell
 * the continue token early (the API server writes a list's `metadata` before its `items`)
 * lets the next page be requested while this one's items are still being decoded, so the
 * server's work on page n+1 overlaps the client's on page n. Never more than that one page
 * ahead: its body waits unread (TCP backpressure) until the current page is done.
 */
import type { IncomingMessage } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import { KeptAliveAgents } from './abortable-http.js';
import { kubeRequest, readJson, type Query } from './api-request.js';
import { KubeError } from './errors.js';

export interface ListPage<T> {
  readonly items: T[];
  readonly resourceVersion: string;
  readonly continueToken: string | undefined;
}

/**
 * Reads one list response into a page (default: the whole body as JSON, `readJsonPage`). A
 * reader that knows the continue token before the page is complete tells `onContinue` (at most
 * once; undefined = the last page), so the next page can be asked for meanwhile.
 */
export type PageReader<T> = (res: IncomingMessage, what: string, signal: AbortSignal, onContinue?: (token: string | undefined) => void) => Promise<ListPage<T>>;

/** A list response read whole with JSON.parse. */
export async function readJsonPage<T>(res: IncomingMessage, what: string, signal: AbortSignal): Promise<ListPage<T>> {
  const body = (await readJson(res, what, signal)) as { items?: unknown; metadata?: { resourceVersion?: unknown; continue?: unknown } } | null;
  if (body === null || typeof body !== 'object' || !Array.isArray(body.items)) {
    throw new KubeError('ERR_KUBE_RESPONSE_INVALID', `${what}: the answer has no items`, { status: 'unavailable' });
  }
  const cont = body.metadata?.continue;
  const rv = body.metadata?.resourceVersion;
  return {
    items: body.items as T[],
    resourceVersion: typeof rv === 'string' ? rv : '',
    continueToken: typeof cont === 'string' && cont !== '' ? cont : undefined,
  };
}

export interface ListPageRequest {
  readonly kubeConfig: KubeConfig;
  /** Collection path, e.g. `/api/v1/pods`. */
  readonly path: string;
  /** Selectors and `limit`; the continue token is added here. */
  readonly query: Query;
  readonly continueToken: string | undefined;
  readonly timeoutMs: number;
  readonly nowMs: number;
  readonly signal: AbortSignal;
  /** How a response becomes a page (default `readJsonPage`). */
  readonly readPage?: PageReader<unknown>;
  /** Told the continue token as soon as the reader knows it. */
  readonly onContinue?: (token: string | undefined) => void;
  /** Kept-alive connections (default: one per request). */
  readonly agents?: KeptAliveAgents;
}

export async function fetchListPage<T>(req: ListPageRequest): Promise<ListPage<T>> {
  const what = `list ${req.path}`;
  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new KubeError('ERR_KUBE_TIMEOUT', `${what}: no answer within ${req.timeoutMs} ms`, { status: 'deadline-exceeded' })),
    req.timeoutMs,
  );
  timer.unref();
  const both = AbortSignal.any([req.signal, deadline.signal]);
  try {
    const query: Query = { ...req.query, ...(req.continueToken ? { continue: req.continueToken } : {}) };
    const res = await kubeRequest(req.kubeConfig, req.path, query, { signal: both, nowMs: req.nowMs, what, ...(req.agents ? { agents: req.agents } : {}) });
    return (await (req.readPage ?? readJsonPage)(res, what, both, req.onContinue)) as ListPage<T>;
  } finally {
    clearTimeout(timer);
  }
}

export interface ListAllRequest extends Omit<ListPageRequest, 'continueToken' | 'nowMs' | 'onContinue' | 'agents'> {
  /** Read per page, for its Retry-After arithmetic. */
  readonly now: () => number;
}

/** A page request under way: `early` settles with its continue token as soon as it is known (undefined when the request failed). */
interface PendingPage<T> {
  readonly early: Promise<string | undefined>;
  readonly page: Promise<ListPage<T>>;
  readonly cancel: () => void;
}

function requestPage<T>(req: ListAllRequest, agents: KeptAliveAgents, continueToken: string | undefined): PendingPage<T> {
  const cancel = new AbortController();
  let tell: (token: string | undefined) => void = () => undefined;
  const early = new Promise<string | undefined>((resolve) => (tell = resolve));
  const { now, ...rest } = req;
  const page = fetchListPage<T>({ ...rest, signal: AbortSignal.any([req.signal, cancel.signal]), continueToken, nowMs: now(), agents, onContinue: (t) => tell(t) });
  page.then((p) => tell(p.continueToken), () => tell(undefined));
  return { early, page, cancel: () => cancel.abort() };
}

/**
 * Requests page after page until the last, handing each page's items to `onPage` in order;
 * resolves with the list's resourceVersion (its first page's: the snapshot every page of a
 * list is served from, and the one a watch after it must start from so that nothing changed
 * meanwhile is missed) and page count, or undefined when `signal` aborted meanwhile. A failed
 * page rejects the whole list (the page ahead is cancelled).
 */
export async function listAllPages<T>(req: ListAllRequest, onPage: (items: T[]) => void): Promise<{ resourceVersion: string; pages: number } | undefined> {
  const agents = new KeptAliveAgents();
  let current: PendingPage<T> | undefined = requestPage<T>(req, agents, undefined);
  let ahead: PendingPage<T> | undefined;
  let resourceVersion: string | undefined;
  let pages = 0;
  try {
    while (current !== undefined) {
      const early: string | undefined = await current.early;
      if (early !== undefined && !req.signal.aborted) ahead = requestPage<T>(req, agents, early);
      const page: ListPage<T> = await current.page;
      if (req.signal.aborted) return undefined;
      pages++;
      resourceVersion ??= page.resourceVersion;
      onPage(page.items);
      if (ahead !== undefined && early !== page.continueToken) {
        ahead.cancel();
        ahead = undefined;
      }
      current = ahead ?? (page.continueToken !== undefined ? requestPage<T>(req, agents, page.continueToken) : undefined);
      ahead = undefined;
    }
    return { resourceVersion: resourceVersion ?? '', pages };
  } finally {
    current?.cancel();
    ahead?.cancel();
    agents.close();
  }
}
