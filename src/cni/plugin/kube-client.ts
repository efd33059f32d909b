/**
 * A small Kubernetes client for the plugin: GET one pod and one namespace over HTTPS with the
 * kubeconfig's bearer token or client certificate. Not @kubernetes/client-node, which costs ~650 ms
 * to load in a process that lives for one CNI call. node:http over a TLS socket from api-tls.ts,
 * which checks the server's certificate before the request gets the socket: with node:https the
 * request would be written into the socket while the handshake runs, and only the timing of
 * TLS's buffering would keep it from a server the check then refuses; here it cannot exist yet.
 *
 * Each request ends after `requestTimeoutMs` on the plugin's clock, counted from the start of
 * the request (connect, TLS, response: one bound for all of it), or earlier when the caller's
 * signal aborts (the ADD's budget); either way its socket is destroyed.
 */
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import type { X509Certificate } from 'node:crypto';
import { systemClock, type Clock } from '../../core/clock.js';
import { abortReason, deadline, isDeadlineError } from '../../core/deadline.js';
import { CniError } from './cni-error.js';
import type { KubeAccess } from './kubeconfig.js';
import { connectApiServer } from './api-tls.js';
import { parseCaBundle, UntrustedServerError } from './server-chain.js';
import { podFromObject, stringMap, type PodInfo } from './pod-info.js';

export { podFromObject, type ContainerInfo, type PodInfo } from './pod-info.js';

export interface NamespaceInfo {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** What the plugin needs from the API server; `signal` abandons the request. */
export interface PodSource {
  getPod(namespace: string, name: string, signal?: AbortSignal): Promise<PodInfo>;
  getNamespace(name: string, signal?: AbortSignal): Promise<NamespaceInfo>;
}

/** Why a request failed: decides retry and the CNI code of the final error. */
export type KubeFailure = 'unreachable' | 'server-error' | 'not-found' | 'rejected' | 'untrusted';

export class KubeRequestError extends CniError {
  readonly failure: KubeFailure;
  constructor(failure: KubeFailure, message: string) {
    super(failure === 'unreachable' || failure === 'server-error' ? 'ERR_CNI_TRY_AGAIN' : 'ERR_CNI_KUBE_API', message);
    this.failure = failure;
  }
}

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface HttpsKubeClientOptions {
  readonly access: KubeAccess;
  readonly requestTimeoutMs: number;
  /** Runs the request deadlines (default: the system clock). */
  readonly clock?: Clock;
}

export class HttpsKubeClient implements PodSource {
  readonly #access: KubeAccess;
  readonly #timeoutMs: number;
  readonly #clock: Clock;
  #anchors: readonly X509Certificate[] | undefined;

  constructor(options: HttpsKubeClientOptions) {
    this.#access = options.access;
    // Parsed once for both GETs; a CA that is not PEM certificates is a configuration error (7).
    this.#anchors = options.access.caPem === undefined || options.access.insecureSkipTlsVerify ? undefined : parseCaBundle(options.access.caPem);
    this.#timeoutMs = options.requestTimeoutMs;
    this.#clock = options.clock ?? systemClock;
  }

  async getPod(namespace: string, name: string, signal?: AbortSignal): Promise<PodInfo> {
    const obj = await this.#get(`/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`, signal);
    return podFromObject(obj);
  }

  async getNamespace(name: string, signal?: AbortSignal): Promise<NamespaceInfo> {
    const obj = await this.#get(`/api/v1/namespaces/${encodeURIComponent(name)}`, signal);
    const meta = isObject(obj) && isObject(obj.metadata) ? obj.metadata : {};
    return { name, labels: stringMap(meta.labels) };
  }

  async #get(path: string, signal: AbortSignal | undefined): Promise<unknown> {
    const url = new URL(path, this.#access.server);
    const limit = deadline(this.#timeoutMs, { what: `GET ${url.pathname} on ${url.host}`, parent: signal, clock: this.#clock });
    try {
      return await this.#request(url, limit.signal);
    } catch (err) {
      // Our own deadline: the API server did not answer in time (retried as unreachable).
      // The caller's abort (the ADD budget): its reason, as it is.
      if (limit.signal.aborted) {
        if (signal?.aborted) throw abortReason(signal);
        if (isDeadlineError(limit.signal.reason)) {
          throw new KubeRequestError('unreachable', `GET ${url.pathname} on ${url.host}: no answer within ${this.#timeoutMs} ms`);
        }
      }
      throw err;
    } finally {
      limit.dispose();
    }
  }

  #request(url: URL, signal: AbortSignal): Promise<unknown> {
    const access = this.#access;
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'certbroker-istio-cni' };
    if (access.token) headers.authorization = `Bearer ${access.token.reveal()}`;
    const host = url.hostname.replace(/^\[(.*)\]$/u, '$1');
    const isHttps = url.protocol === 'https:';
    const port = Number(url.port || (isHttps ? 443 : 80));
    // No agent with `createConnection` (node:http uses it only then); `agent: false` would make a new Agent.
    const tls: RequestOptions = isHttps
      ? {
          defaultPort: 443,
          createConnection: (_opts, ready) => {
            connectApiServer({ access, anchors: this.#anchors, host, port, clock: this.#clock, signal }, ready);
            return undefined;
          },
        }
      : { agent: false };
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        { host, port, path: `${url.pathname}${url.search}`, method: 'GET', headers, signal, ...tls },
        (res: IncomingMessage) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size <= 4 * 1024 * 1024) chunks.push(c);
          });
          res.on('error', () => reject(new KubeRequestError('unreachable', `GET ${url.pathname}: response interrupted`)));
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            const body = Buffer.concat(chunks).toString('utf8');
            if (status === 200) {
              try {
                resolve(JSON.parse(body));
              } catch {
                reject(new KubeRequestError('server-error', `GET ${url.pathname}: response is not JSON`));
              }
              return;
            }
            const reason = apiStatusMessage(body);
            const what = `GET ${url.pathname}: HTTP ${status}${reason ? ` (${reason})` : ''}`;
            if (status === 404) reject(new KubeRequestError('not-found', what));
            else if (status === 429 || status >= 500) reject(new KubeRequestError('server-error', what));
            else reject(new KubeRequestError('rejected', what));
          });
        },
      );
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (signal.aborted) reject(abortReason(signal));
        else if (err instanceof UntrustedServerError) reject(new KubeRequestError('untrusted', err.message));
        else reject(new KubeRequestError('unreachable', `GET ${url.pathname} on ${url.host}: ${err.code ?? err.message}`));
      });
      req.end();
    });
  }
}

/** The `message` of a Kubernetes Status body, shortened; never the raw body. */
function apiStatusMessage(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (isObject(parsed) && typeof parsed.message === 'string') return parsed.message.slice(0, 200);
  } catch {
    /* not a Status object */
  }
  return '';
}
