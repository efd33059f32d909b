/**
 * Dependencies that hang, on loopback: a TCP server that accepts and never answers (not even a
 * TLS handshake), and a TLS server that completes the handshake and then goes silent (reads
 * and discards everything, never writes a byte). Both count the connections they hold, so a
 * test can tell whether a client closed its sockets.
 *
 *   const hung = await startHungServer();                  // plain TCP
 *   const silent = await startHungServer({ tls: material }); // TLS, then silence
 *   ... hung.port, hung.openConnections, hung.accepted ...
 *   await hung.close();
 */
import { createServer as createTcpServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { makeServingMaterial } from '../../src/devcluster/serving-cert.js';

export interface HungServer {
  readonly port: number;
  /** `127.0.0.1:<port>`. */
  readonly address: string;
  /** Connections held open right now. */
  readonly openConnections: number;
  /** Connections accepted so far (TLS: handshakes completed). */
  readonly accepted: number;
  close(): Promise<void>;
}

export interface TlsMaterial {
  readonly certPem: string;
  readonly keyPem: string;
  /** What clients must trust to accept `certPem` (valid for localhost and 127.0.0.1). */
  readonly caCertPem: string;
}

/** Serving material for a silent TLS server, valid for localhost / 127.0.0.1. */
export async function silentTlsMaterial(): Promise<TlsMaterial> {
  const m = await makeServingMaterial({ hosts: ['127.0.0.1', 'localhost'], nowMs: Date.now() });
  return { certPem: m.certPem, keyPem: m.keyPem, caCertPem: m.caCertPem };
}

export async function startHungServer(options: { readonly tls?: TlsMaterial } = {}): Promise<HungServer> {
  /** Raw TCP connections (what `openConnections` counts). */
  const open = new Set<Socket>();
  /** Everything to destroy on close (raw and TLS sockets). */
  const all = new Set<Socket>();
  let accepted = 0;
  const track = (s: Socket, set: Set<Socket>) => {
    set.add(s);
    s.on('error', () => undefined);
    s.on('close', () => set.delete(s));
  };
  const hold = (s: Socket) => {
    accepted++;
    track(s, all);
    s.on('data', () => undefined); // read and discard: never answer
  };
  let server: Server;
  if (options.tls) {
    const tls = createTlsServer({ cert: options.tls.certPem, key: options.tls.keyPem, ALPNProtocols: ['h2', 'http/1.1'] }, (s: TLSSocket) => hold(s));
    tls.on('tlsClientError', () => undefined);
    // Raw connections, so a client stuck before or during the handshake counts too.
    tls.on('connection', (s: Socket) => {
      track(s, open);
      track(s, all);
    });
    server = tls;
  } else {
    server = createTcpServer((s) => {
      track(s, open);
      hold(s);
    });
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    port,
    address: `127.0.0.1:${port}`,
    get openConnections() {
      return open.size;
    },
    get accepted() {
      return accepted;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of all) s.destroy();
        server.close(() => resolve());
      }),
  };
}
