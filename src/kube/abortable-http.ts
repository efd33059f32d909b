/**
 * Abortable requests for @kubernetes/client-node's generated APIs. Its default HTTP library
 * (node-fetch, no signal, no timeout) lets a request to an API server that accepts and never
 * answers hang for as long as the connection lives, with its socket open. `abortableApi(kc,
 * CoreV1Api, signal)` is `kc.makeApiClient(CoreV1Api)` whose requests go through node:http(s)
 * with the same URL, headers, body and TLS agent (client-node builds the agent from the
 * kubeconfig: CA, client certificate, skip-verify) and whose sockets are destroyed when
 * `signal` aborts; the call then rejects with the signal's reason (a `DeadlineError` for
 * deadlines). One client per signal: it is cheap. By default no connection is kept between
 * requests; a caller on a hot path (the CSR backend: five API calls per certificate) passes a
 * `KeptAliveAgents` it owns, and its requests reuse kept-alive TLS connections instead of one
 * TCP + TLS handshake per call (`close()` frees them).
 *
 *   await abortableApi(kc, CoreV1Api, signal).readNamespacedPod({ namespace, name });
 *
 * (A per-call `{ httpApi }` option is not enough: client-node 1.3 accepts it and still sends
 * through the client's configured library.)
 */
import { createHash } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import {
  ApiException,
  createConfiguration,
  ResponseContext,
  ServerConfiguration,
  wrapHttpLibrary,
  type ApiConstructor,
  type ApiType,
  type KubeConfig,
  type RequestContext,
} from '@kubernetes/client-node';
import { abortReason } from '../core/deadline.js';
import { isCertbrokerError } from '../core/errors.js';
import { requestAgent } from './api-request.js';
import { KubeApiError, KubeError } from './errors.js';

/** Idle kept-alive sockets close after this (under Node's 5 s server keepAliveTimeout, so a reuse does not race the server's close). */
const IDLE_SOCKET_MS = 4000;
const TLS_FIELDS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;

/**
 * Kept-alive agents for `abortableApi`, one per distinct TLS material (client-node rebuilds its
 * agent per request from the kubeconfig, so a rotated client certificate gets a new agent). Only
 * plain http/https agents are replaced; proxy agents stay per request. Aborting a request still
 * destroys its socket; idle sockets close after 4 s and do not hold the process open.
 */
export class KeptAliveAgents {
  readonly #agents = new Map<string, HttpAgent>();

  /** The kept-alive agent standing in for client-node's per-request `agent`, or undefined to use it as is. */
  agentFor(agent: unknown): HttpAgent | undefined {
    const plain = agent instanceof HttpAgent && (agent.constructor === HttpsAgent || agent.constructor === HttpAgent);
    if (!plain) return undefined;
    const options = (agent as HttpAgent & { options: Record<string, unknown> }).options;
    const h = createHash('sha256').update(agent.constructor === HttpsAgent ? 'https' : 'http');
    for (const f of TLS_FIELDS) {
      const v = options[f];
      const parts = v === undefined ? [] : Array.isArray(v) ? v : [v];
      h.update(`\0${f}=${parts.length}`);
      for (const part of parts) h.update(Buffer.isBuffer(part) ? part : Buffer.from(String(part)));
    }
    const key = h.digest('hex');
    let kept = this.#agents.get(key);
    if (!kept) {
      const kind = agent.constructor === HttpsAgent ? HttpsAgent : HttpAgent;
      kept = new kind({ ...options, keepAlive: true, timeout: IDLE_SOCKET_MS, scheduling: 'lifo' });
      if (this.#agents.size >= 8) {
        const [oldestKey, oldest] = this.#agents.entries().next().value as [string, HttpAgent];
        this.#agents.delete(oldestKey);
        oldest.destroy();
      }
      this.#agents.set(key, kept);
    }
    return kept;
  }

  /** Closes every kept connection. */
  close(): void {
    for (const a of this.#agents.values()) a.destroy();
    this.#agents.clear();
  }
}

/** One request, answered with status, headers and body, or rejected when `signal` aborts. */
function send(ctx: RequestContext, signal: AbortSignal, pool?: KeptAliveAgents): Promise<ResponseContext> {
  return new Promise<ResponseContext>((resolve, reject) => {
    if (signal.aborted) {
      reject(abortReason(signal));
      return;
    }
    const url = new URL(ctx.getUrl());
    const raw = ctx.getBody();
    if (raw !== undefined && typeof raw !== 'string' && !(raw instanceof URLSearchParams)) {
      reject(new Error('kubeCallOptions: only string and URLSearchParams request bodies are supported'));
      return;
    }
    const body = raw === undefined ? undefined : Buffer.from(raw.toString(), 'utf8');
    const headers: Record<string, string> = { ...ctx.getHeaders() };
    if (body !== undefined) headers['content-length'] = String(body.length);
    const { agent, release } = requestAgent(ctx.getAgent(), pool);
    const onResponse = (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (err) => reject(signal.aborted ? abortReason(signal) : err));
      res.on('end', () => {
        const data = Buffer.concat(chunks);
        const h: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h[k] = Array.isArray(v) ? v.join(', ') : v;
        resolve(new ResponseContext(res.statusCode ?? 0, h, { text: async () => data.toString('utf8'), binary: async () => data }));
      });
    };
    const options = { method: ctx.getHttpMethod().toString(), headers, signal, ...(agent ? { agent } : {}) };
    const req = url.protocol === 'http:' ? httpRequest(url, options, onResponse) : httpsRequest(url, options, onResponse);
    req.on('error', (err) => reject(signal.aborted ? abortReason(signal) : err));
    req.on('close', release);
    req.end(body);
  });
}

/** `kubeConfig.makeApiClient(apiClientType)`, with every request honouring `signal` (and reusing `pool`'s connections when given). */
export function abortableApi<T extends ApiType>(kubeConfig: KubeConfig, apiClientType: ApiConstructor<T>, signal: AbortSignal, pool?: KeptAliveAgents): T {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('No active cluster!');
  return new apiClientType(
    createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: kubeConfig },
      httpApi: wrapHttpLibrary({ send: (ctx) => send(ctx, signal, pool) }),
    }),
  );
}

/** The Status fields of an error body client-node handed over (a string or an object). */
function statusOf(body: unknown): { reason?: string; message?: string } {
  let b: unknown = body;
  if (typeof b === 'string') {
    try {
      b = JSON.parse(b);
    } catch {
      return {};
    }
  }
  if (b === null || typeof b !== 'object') return {};
  const { reason, message } = b as { reason?: unknown; message?: unknown };
  return { ...(typeof reason === 'string' ? { reason } : {}), ...(typeof message === 'string' ? { message: message.slice(0, 500) } : {}) };
}

/** client-node's ApiException as the kube room's `KubeApiError`; a transport failure as `ERR_KUBE_UNREACHABLE`. */
export function asKubeError(err: unknown, what: string): Error {
  if (err instanceof ApiException) {
    const s = statusOf(err.body);
    return new KubeApiError({ what, httpStatus: err.code, ...(s.reason ? { reason: s.reason } : {}), ...(s.message ? { detail: s.message } : {}) });
  }
  if (isCertbrokerError(err)) return err;
  return new KubeError('ERR_KUBE_UNREACHABLE', `${what}: ${err instanceof Error ? err.message : String(err)}`, { status: 'unavailable', cause: err });
}
