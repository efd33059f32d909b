/**
 * The engine under test, on real sockets: `startTlsEngine` (H2Server over TLS with a
 * self-signed openssl certificate, ALPN h2) and `startPlainEngine` (H2Connection on plain TCP
 * sockets, for raw-frame tests), both with a handler per stream; and `rawConnect`, a tiny
 * raw-frame client over TCP (preface, frames out, frames in) for the protocol cases.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { systemClock } from '../../../src/core/clock.js';
import { H2Connection } from '../../../src/h2/connection.js';
import type { H2Guards } from '../../../src/h2/flood-guard.js';
import { CLIENT_PREFACE, FRAME_HEADER_BYTES, frameOf } from '../../../src/h2/frames.js';
import { H2Server } from '../../../src/h2/server.js';
import { DEFAULT_H2_SETTINGS, type H2Settings, type H2Timeouts } from '../../../src/h2/settings.js';
import type { H2Stream } from '../../../src/h2/stream.js';
import { OpensslCerts } from '../../support/openssl-certs.js';

export type Handler = (stream: H2Stream) => void;

export interface RunningEngine {
  readonly port: number;
  readonly errors: Error[];
  close(): Promise<void>;
}

export async function startTlsEngine(handler: Handler, settings?: Partial<H2Settings>, guards?: Partial<H2Guards>, timeouts?: Partial<H2Timeouts>): Promise<RunningEngine & { server: H2Server; certPem: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'h2-engine-'));
  const pki = new OpensslCerts(dir);
  const root = pki.ca('h2-test-root');
  const cert = pki.issue('localhost', root, { san: 'DNS:localhost,IP:127.0.0.1', eku: 'serverAuth' });
  rmSync(dir, { recursive: true, force: true });
  const errors: Error[] = [];
  const server = new H2Server({
    tls: { cert: cert.certPem, key: cert.keyPem },
    ...(settings ? { settings } : {}),
    ...(guards ? { guards } : {}),
    ...(timeouts ? { timeouts } : {}),
    onStream: handler,
    onError: (_what, err) => errors.push(err),
  });
  await new Promise<void>((resolve) => server.tls.listen(0, '127.0.0.1', resolve));
  const port = (server.tls.address() as AddressInfo).port;
  return {
    server,
    certPem: root.certPem,
    port,
    errors,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.destroyAll();
      }),
  };
}

export async function startPlainEngine(handler: Handler, settings?: Partial<H2Settings>, guards?: Partial<H2Guards>, timeouts?: Partial<H2Timeouts>): Promise<RunningEngine & { connections: H2Connection[] }> {
  const errors: Error[] = [];
  const connections: H2Connection[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    connections.push(
      new H2Connection(socket, {
        settings: { ...DEFAULT_H2_SETTINGS, ...settings },
        ...(guards ? { guards } : {}),
        ...(timeouts ? { timeouts } : {}),
        clock: systemClock,
        onStream: handler,
        onError: (err) => errors.push(err),
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    errors,
    connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  readonly payload: Buffer;
}

/** A raw-frame client: sends exactly the bytes given, parses what comes back. */
export class RawClient {
  readonly socket: Socket;
  readonly frames: Frame[] = [];
  #buf = Buffer.alloc(0);
  #closed = false;
  #waiters: Array<() => void> = [];

  constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, chunk]);
      while (this.#buf.length >= FRAME_HEADER_BYTES) {
        const len = this.#buf.readUIntBE(0, 3);
        if (this.#buf.length < FRAME_HEADER_BYTES + len) break;
        this.frames.push({ type: this.#buf[3]!, flags: this.#buf[4]!, streamId: this.#buf.readUInt32BE(5) & 0x7fffffff, payload: Buffer.from(this.#buf.subarray(9, 9 + len)) });
        this.#buf = this.#buf.subarray(9 + len);
      }
      this.#wake();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.#closed = true;
      this.#wake();
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }

  send(...frames: Buffer[]): void {
    if (!this.#closed) this.socket.write(Buffer.concat(frames));
  }

  frame(type: number, flags: number, streamId: number, payload?: Uint8Array): void {
    this.send(frameOf(type, flags, streamId, payload));
  }

  /** Waits (bounded) until `match` finds a frame received; undefined when the connection closed or the wait ran out. */
  async waitFor(match: (f: Frame) => boolean, ms = 5000): Promise<Frame | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const f = this.frames.find(match);
      if (f) return f;
      if (this.#closed || Date.now() > deadline) return undefined;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Waits (bounded) for the connection to close; true when it did. */
  async waitClosed(ms = 5000): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!this.#closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.#closed;
  }

  close(): void {
    this.socket.destroy();
  }
}

/** Connects on TCP and sends the preface and an empty SETTINGS frame (unless `preface` is false). */
export async function rawConnect(port: number, preface = true): Promise<RawClient> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const c = new RawClient(socket);
  if (preface) c.send(CLIENT_PREFACE, frameOf(0x4, 0, 0));
  return c;
}
