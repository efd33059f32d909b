/**
 * One HTTP POST over a Unix socket for the plugin's calls to the node broker, with the registration
 * socket's method and content type (src/protocol/cni-event.ts) (node:http only: the
 * plugin is a short-lived process). Its users are imported by plugin.ts when needed, and node:http
 * with them: a bundled module's import() runs its require then (a single executable cannot
 * import() a builtin, and a startup snapshot cannot hold node:http). Resolves with the status and up to 1 MiB of the body; rejects
 * with the socket error (or the signal's abort), the request destroyed either way.
 */
import { request, type RequestOptions } from 'node:http';
import { CNI_ADD_EVENT_CONTENT_TYPE, CNI_ADD_EVENT_METHOD } from '../../protocol/cni-event.js';

export interface UnixHttpAnswer {
  readonly status: number;
  readonly body: string;
}

const MAX_ANSWER_BYTES = 1024 * 1024;

export function postOverUnixSocket(socketPath: string, path: string, body: string, signal: AbortSignal): Promise<UnixHttpAnswer> {
  return new Promise<UnixHttpAnswer>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const req = request(
      {
        socketPath,
        path,
        method: CNI_ADD_EVENT_METHOD,
        headers: { 'content-type': CNI_ADD_EVENT_CONTENT_TYPE, 'content-length': Buffer.byteLength(body), host: 'unix' },
        agent: false,
        // A Unix socket has no TLS name: without this the one-shot agent derives one from the host
        // header and tests it with net.isIP, whose first use compiles the IPv6 pattern (~2-3 ms
        // of a short-lived process).
        servername: '',
      } as RequestOptions,
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size <= MAX_ANSWER_BYTES) chunks.push(c);
        });
        res.on('error', (err) => settle(() => reject(Object.assign(err, { interrupted: true }))));
        res.on('end', () => settle(() => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') })));
      },
    );
    // The abort is wired by hand: node:http's `signal` option loads stream helpers (end-of-stream,
    // abort listeners) that nothing else in the plugin needs (~0.7 ms).
    const onAbort = () => req.destroy(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    const settle = (done: () => void) => {
      signal.removeEventListener('abort', onAbort);
      done();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('error', (err) => settle(() => reject(err)));
    req.end(body);
  });
}

/** The answer was cut off after the status line (the socket error then carries `interrupted`). */
export function isInterrupted(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { interrupted?: unknown }).interrupted === true;
}
