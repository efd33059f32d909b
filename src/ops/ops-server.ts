/**
 * The operations endpoint every long-running component serves: `/healthz` (the process is
 * alive and its loops are turning), `/readyz` (it can do its job now), `/metrics`
 * (Prometheus text format from the component's own registry).
 *
 * Lifecycle (src/core/long-lived.ts): `startOpsServer({ signal })` listens; aborting `signal` or
 * `stop(deadlineMs)` closes the listener and every open connection (probes and scrapes are short;
 * nothing is drained).
 */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from '../core/log.js';
import { settleWithin, stopOnAbort, type Stoppable } from '../core/long-lived.js';
import { listenTcp } from './listen.js';

export interface Check {
  readonly name: string;
  /** Returns undefined when fine, or a short human reason when not. */
  readonly check: () => string | undefined;
}

export interface OpsServerOptions {
  readonly host: string;
  readonly port: number;
  readonly registry: Registry;
  readonly liveness?: readonly Check[];
  readonly readiness: readonly Check[];
  readonly logger: Logger;
  /** Aborting it stops the server as `stop()` does. */
  readonly signal?: AbortSignal;
}

/** How long `stop()` waits by default for the listener to close (its connections are closed at once). */
export const OPS_STOP_DEADLINE_MS = 2000;

export interface OpsServer extends Stoppable {
  readonly port: number;
  /** `stop()` with its default deadline. */
  close(): Promise<void>;
}

function evaluate(checks: readonly Check[]): { ok: boolean; body: string } {
  const failures: string[] = [];
  for (const c of checks) {
    let reason: string | undefined;
    try {
      reason = c.check();
    } catch (err) {
      reason = err instanceof Error ? err.message : String(err);
    }
    if (reason !== undefined) failures.push(`[-]${c.name} failed: ${reason}`);
  }
  if (failures.length === 0) return { ok: true, body: 'ok\n' };
  return { ok: false, body: failures.join('\n') + '\n' };
}

export async function startOpsServer(options: OpsServerOptions): Promise<OpsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/healthz' || path === '/livez') {
      const r = evaluate(options.liveness ?? []);
      res.writeHead(r.ok ? 200 : 503, { 'content-type': 'text/plain' }).end(r.body);
      return;
    }
    if (path === '/readyz') {
      const r = evaluate(options.readiness);
      res.writeHead(r.ok ? 200 : 503, { 'content-type': 'text/plain' }).end(r.body);
      return;
    }
    if (path === '/metrics') {
      options.registry
        .metrics()
        .then((text) => res.writeHead(200, { 'content-type': options.registry.contentType }).end(text))
        .catch((err: unknown) => {
          options.logger.error('metrics rendering failed', { err });
          res.writeHead(500).end();
        });
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  server.keepAliveTimeout = 5_000;
  const port = await listenTcp(server, options.port, options.host);
  options.logger.info('ops endpoint listening', { host: options.host, port });
  let closed: Promise<void> | undefined;
  const stop = async (deadlineMs = OPS_STOP_DEADLINE_MS) => {
    closed ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    await settleWithin(closed, deadlineMs);
  };
  stopOnAbort(options.signal, () => stop());
  return { port, stop, close: () => stop() };
}
