/**
 * GET requests to the API server with the KubeConfig's own transport and credentials:
 * client-node's `applyToFetchOptions` gives the agent (CA, client certificate, TLS server name,
 * proxy) and the headers (bearer token; exec and token-file credentials refreshed per call), so
 * auth and TLS are exactly those of client-node's API clients. The informer needs what
 * client-node's `Watch` does not give: the status and `Retry-After` of a refused watch, and
 * abort at any moment (an idle watchdog, a deadline, stop).
 *
 * `kubeRequest` resolves with the response once a 2xx status line and headers arrived; any other
 * status is a `KubeApiError` (Status reason and message, Retry-After); a network failure is
 * `ERR_KUBE_UNREACHABLE`. Aborting `signal` rejects with its reason.
 */
import { request as httpRequest, type Agent, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import type { KeptAliveAgents } from './abortable-http.js';
import { KubeApiError, KubeError } from './errors.js';

/** Bytes of an error body read for its Status message. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;
/** Longest Retry-After honoured (a server asking for more gets this). */
export const MAX_RETRY_AFTER_MS = 10 * 60 * 1000;

export type Query = Readonly<Record<string, string | number | boolean | undefined>>;

/** `Retry-After` in milliseconds: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(raw: string | undefined, nowMs: number): number | undefined {
  if (raw === undefined) return undefined;
  const v = raw.trim();
  if (/^\d+$/.test(v)) return Math.min(Number(v) * 1000, MAX_RETRY_AFTER_MS);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, at - nowMs), MAX_RETRY_AFTER_MS);
}

/** The URL of `path` on the current cluster (a server URL with a path prefix keeps it). */
export function apiUrl(kubeConfig: KubeConfig, path: string, query: Query): URL {
  const server = kubeConfig.getCurrentCluster()?.server;
  if (!server) throw new KubeError('ERR_KUBE_CONFIG_INVALID', 'kubeconfig has no current cluster with a server URL', { status: 'invalid-argument' });
  const url = new URL(server.replace(/\/+$/, '') + path);
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
  return url;
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new KubeError('ERR_KUBE_INFORMER_STOPPED', 'request aborted', { status: 'cancelled' });
}

/**
 * The agent a request goes through: `pool`'s kept-alive one in place of client-node's per-request
 * agent `own` (destroyed unused then), or `own` itself, whose sockets `release` frees once the
 * request closes (a kept one stays).
 */
export function requestAgent(own: unknown, pool: KeptAliveAgents | undefined): { readonly agent: Agent | undefined; readonly release: () => void } {
  const destroyOwn = () => (own as { destroy?: () => void } | undefined)?.destroy?.();
  const kept = pool?.agentFor(own);
  if (!kept) return { agent: own as Agent | undefined, release: destroyOwn };
  destroyOwn();
  return { agent: kept, release: () => undefined };
}

/** Reads at most `max` bytes of `res` as UTF-8 (the rest is discarded). */
function readSome(res: IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      if (size < max) chunks.push(c.subarray(0, max - size));
      size += c.length;
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

/** The Status `reason` and `message` of an error body, when it is one. */
function statusFields(body: string): { reason?: string; message?: string } {
  try {
    const s = JSON.parse(body) as { kind?: unknown; reason?: unknown; message?: unknown };
    return {
      ...(typeof s.reason === 'string' && s.reason !== '' ? { reason: s.reason } : {}),
      ...(typeof s.message === 'string' && s.message !== '' ? { message: s.message.slice(0, 500) } : {}),
    };
  } catch {
    return {};
  }
}

export interface KubeRequestOptions {
  readonly signal: AbortSignal;
  /** For Retry-After given as a date. */
  readonly nowMs: number;
  /** How the request is named in errors (default `<method> <path>`). */
  readonly what?: string;
  /** Kept-alive connections to reuse (a paged list: one TLS handshake, not one per page); default a fresh connection per request. */
  readonly agents?: KeptAliveAgents;
  /** Default GET. */
  readonly method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Sent as JSON (`content-type: application/json`). */
  readonly body?: unknown;
}

/**
 * A request on the current cluster (GET unless told: the informer's list and watch, and API
 * groups client-node has no typed client for, such as PodCertificateRequests); resolves with the
 * 2xx response (its body unread).
 */
export async function kubeRequest(kubeConfig: KubeConfig, path: string, query: Query, options: KubeRequestOptions): Promise<IncomingMessage> {
  const { signal } = options;
  const method = options.method ?? 'GET';
  const what = options.what ?? `${method} ${path}`;
  if (signal.aborted) throw abortReason(signal);
  const url = apiUrl(kubeConfig, path, query);
  const fetchOptions = await kubeConfig.applyToFetchOptions({});
  if (signal.aborted) throw abortReason(signal);
  const headers: Record<string, string> = { accept: 'application/json' };
  const body = options.body === undefined ? undefined : JSON.stringify(options.body);
  if (body !== undefined) headers['content-type'] = 'application/json';
  (fetchOptions.headers as { forEach(fn: (value: string, key: string) => void): void } | undefined)?.forEach((value, key) => {
    headers[key] = value;
  });
  const { agent, release } = requestAgent(fetchOptions.agent, options.agents);
  const send = url.protocol === 'http:' ? httpRequest : httpsRequest;
  return new Promise<IncomingMessage>((resolve, reject) => {
    let settled = false;
    const done = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      fn();
    };
    const req = send(url, { method, headers, ...(agent ? { agent } : {}) });
    req.on('close', release);
    // TCP keepalive, as client-node's Watch sets it: a peer that vanished is noticed by the kernel too.
    req.on('socket', (socket) => socket.setKeepAlive(true, 30_000));
    const onAbort = () => {
      req.destroy();
      done(() => reject(abortReason(signal)));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('error', (err) => {
      done(() => reject(signal.aborted ? abortReason(signal) : new KubeError('ERR_KUBE_UNREACHABLE', `${what}: ${err.message}`, { status: 'unavailable', cause: err })));
    });
    req.on('response', (res) => {
      const code = res.statusCode ?? 0;
      if (code >= 200 && code < 300) {
        done(() => resolve(res));
        return;
      }
      const retryAfter = res.headers['retry-after'];
      const retryAfterMs = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, options.nowMs);
      void readSome(res, MAX_ERROR_BODY_BYTES).then((body) => {
        const s = statusFields(body);
        req.destroy();
        done(() =>
          reject(
            new KubeApiError({
              what,
              httpStatus: code,
              ...(s.reason ? { reason: s.reason } : {}),
              ...(s.message ? { detail: s.message } : {}),
              ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
            }),
          ),
        );
      });
    });
    req.end(body);
  });
}

/**
 * Streams the body of `res` into `onChunk` and resolves at its end; a broken stream is
 * `ERR_KUBE_UNREACHABLE`, aborting `signal` rejects with its reason, and a throw from `onChunk`
 * (or from `onEnd`) rejects with that error.
 */
export function readBody(res: IncomingMessage, what: string, signal: AbortSignal, onChunk: (chunk: Buffer) => void, onEnd: () => void = () => undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      fn();
    };
    const onAbort = () => {
      res.destroy();
      settle(() => reject(abortReason(signal)));
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    res.on('data', (c: Buffer) => {
      if (settled) return;
      try {
        onChunk(c);
      } catch (err) {
        res.destroy();
        settle(() => reject(err));
      }
    });
    res.on('end', () =>
      settle(() => {
        try {
          onEnd();
          resolve();
        } catch (err) {
          reject(err);
        }
      }),
    );
    const broken = (err?: Error) =>
      settle(() => reject(signal.aborted ? abortReason(signal) : new KubeError('ERR_KUBE_UNREACHABLE', `${what}: the answer broke off${err ? `: ${err.message}` : ''}`, { status: 'unavailable', cause: err })));
    res.on('error', broken);
    res.on('close', () => broken());
  });
}

/** The whole body of `res` parsed as JSON; a broken stream is `ERR_KUBE_UNREACHABLE`, bad JSON `ERR_KUBE_RESPONSE_INVALID`. */
export async function readJson(res: IncomingMessage, what: string, signal: AbortSignal): Promise<unknown> {
  const chunks: Buffer[] = [];
  let parsed: unknown;
  await readBody(res, what, signal, (c) => chunks.push(c), () => {
    try {
      parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch (err) {
      throw new KubeError('ERR_KUBE_RESPONSE_INVALID', `${what}: the answer is not JSON`, { status: 'unavailable', cause: err });
    }
  });
  return parsed;
}
