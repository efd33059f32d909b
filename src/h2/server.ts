/**
 * certbroker's HTTP/2 server engine on a `tls.Server`: every TLS connection that negotiated
 * ALPN `h2` becomes an `H2Connection` (connection.ts); any other is dropped (no HTTP/1.1).
 * The `tls.Server` is exposed as is, so its owner applies the same socket-level controls as on
 * node:http2's server (maxConnections and 'drop', handshakeTimeout, setSecureContext,
 * 'tlsClientError', listening).
 */
import { createServer, type Server as TlsServer, type TLSSocket, type TlsOptions } from 'node:tls';
import { systemClock, type Clock } from '../core/clock.js';
import { H2Connection } from './connection.js';
import type { H2Guards } from './flood-guard.js';
import { DEFAULT_H2_SETTINGS, type H2Settings, type H2Timeouts } from './settings.js';
import type { H2Stream } from './stream.js';

export interface H2ServerOptions {
  /** Certificate, key, handshakeTimeout…; ALPN is set here (h2 only). */
  readonly tls: TlsOptions;
  readonly settings?: Partial<H2Settings>;
  readonly guards?: Partial<H2Guards>;
  /** SETTINGS acknowledgement and graceful-close bounds (settings.ts' defaults otherwise). */
  readonly timeouts?: Partial<H2Timeouts>;
  readonly clock?: Clock;
  /** A request arrived (set the stream's callbacks now). */
  readonly onStream: (stream: H2Stream, connection: H2Connection) => void;
  /** A connection started (before its first stream). */
  readonly onConnection?: (connection: H2Connection) => void;
  /** Connection errors (`what`: 'session') and TLS sockets' errors. */
  readonly onError?: (what: string, err: Error) => void;
}

export class H2Server {
  /** The TLS server (listen, close, maxConnections, setSecureContext, events). */
  readonly tls: TlsServer;
  readonly #connections = new Set<H2Connection>();

  constructor(o: H2ServerOptions) {
    const settings = { ...DEFAULT_H2_SETTINGS, ...o.settings };
    const clock = o.clock ?? systemClock;
    this.tls = createServer({ ...o.tls, ALPNProtocols: ['h2'] });
    // tls.Server reports a failed or timed-out handshake but leaves the socket open: close it.
    this.tls.on('tlsClientError', (_err, socket) => socket.destroy());
    this.tls.on('secureConnection', (socket: TLSSocket) => {
      if (socket.alpnProtocol !== 'h2') {
        socket.destroy();
        return;
      }
      const c = new H2Connection(socket, {
        settings,
        clock,
        ...(o.guards ? { guards: o.guards } : {}),
        ...(o.timeouts ? { timeouts: o.timeouts } : {}),
        onStream: (stream) => o.onStream(stream, c),
        onError: (err) => o.onError?.('session', err),
      });
      this.#connections.add(c);
      c.onClose(() => this.#connections.delete(c));
      o.onConnection?.(c);
    });
  }

  /** Connections open now. */
  get connections(): ReadonlySet<H2Connection> {
    return this.#connections;
  }

  /** Graceful close of every connection (two-step GOAWAY: open streams finish) and no new connections. */
  close(onClosed?: () => void): void {
    this.tls.close(onClosed);
    for (const c of this.#connections) c.close();
  }

  /** Drops every connection now. */
  destroyAll(): void {
    for (const c of this.#connections) c.destroy();
  }
}
