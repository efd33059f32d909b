/** A paged list (`limit`/`continue`), each page within its own request deadline. */
import type { IncomingMessage } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeGet, readJson, type Query } from './api-request.js';
import { KubeError } from './errors.js';

export interface ListPage<T> {
  readonly items: T[];
  readonly resourceVersion: string;
  readonly continueToken: string | undefined;
}

/** Reads one list response into a page (default: the whole body as JSON, `readJsonPage`). */
export type PageReader<T> = (res: IncomingMessage, what: string, signal: AbortSignal) => Promise<ListPage<T>>;

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
    const res = await kubeGet(req.kubeConfig, req.path, query, { signal: both, nowMs: req.nowMs, what });
    return (await (req.readPage ?? readJsonPage)(res, what, both)) as ListPage<T>;
  } finally {
    clearTimeout(timer);
  }
}

export interface ListAllRequest extends Omit<ListPageRequest, 'continueToken' | 'nowMs'> {
  /** Read per page, for its Retry-After arithmetic. */
  readonly now: () => number;
}

/**
 * Requests page after page until the last, handing each page's items to `onPage`; resolves with
 * the list's resourceVersion and page count, or undefined when `signal` aborted meanwhile.
 */
export async function listAllPages<T>(req: ListAllRequest, onPage: (items: T[]) => void): Promise<{ resourceVersion: string; pages: number } | undefined> {
  let continueToken: string | undefined;
  let resourceVersion = '';
  let pages = 0;
  do {
    const page = await fetchListPage<T>({ ...req, continueToken, nowMs: req.now() });
    if (req.signal.aborted) return undefined;
    pages++;
    onPage(page.items);
    continueToken = page.continueToken;
    resourceVersion = page.resourceVersion;
  } while (continueToken !== undefined);
  return { resourceVersion, pages };
}
