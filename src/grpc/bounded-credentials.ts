/**
 * Channel credentials whose connections end when they should. grpc-js gives a connection
 * attempt no deadline: against a server that accepts TCP and never answers the TLS handshake,
 * the attempt (and its socket) lives until the peer closes it, and `client.close()` does not
 * end it either — a process that closed every client stayed alive on that one socket.
 *
 * `BoundedChannelCredentials` wraps other channel credentials (e.g. `createSsl(...)`):
 * - every handshake gets `handshakeTimeoutMs`; one that has not completed by then has its
 *   socket destroyed, so the channel reports a transient failure and reconnects with backoff;
 * - `destroyAll()` destroys every socket it ever handed to grpc-js that is still open. Call it
 *   after `client.close()`: nothing the client opened outlives it, whatever the peer does.
 *
 * It compares equal only to itself, so its channels never share subchannels (and sockets)
 * with another client's.
 */
import type { Socket } from 'node:net';
import { ChannelCredentials } from '@grpc/grpc-js';

type SecureConnector = ReturnType<ChannelCredentials['_createSecureConnector']>;
type ConnectorArgs = Parameters<ChannelCredentials['_createSecureConnector']>;

export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;

export class BoundedChannelCredentials extends ChannelCredentials {
  readonly #inner: ChannelCredentials;
  readonly #handshakeTimeoutMs: number;
  readonly #sockets = new Set<Socket>();
  #destroyed = false;

  constructor(inner: ChannelCredentials, options: { readonly handshakeTimeoutMs?: number } = {}) {
    super();
    this.#inner = inner;
    this.#handshakeTimeoutMs = options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  }

  /** Sockets currently open (tests). */
  get openSockets(): number {
    return this.#sockets.size;
  }

  /** Destroys every open socket; later connection attempts are refused. */
  destroyAll(): void {
    this.#destroyed = true;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
  }

  override _isSecure(): boolean {
    return this.#inner._isSecure();
  }

  override _equals(other: ChannelCredentials): boolean {
    return other === this;
  }

  override _createSecureConnector(...args: ConnectorArgs): SecureConnector {
    const inner = this.#inner._createSecureConnector(...args);
    return {
      connect: (socket: Socket) => {
        if (this.#destroyed) {
          socket.destroy();
          return Promise.reject(new Error('channel closed'));
        }
        this.#track(socket);
        return new Promise((resolve, reject) => {
          let timedOut = false;
          const timer = setTimeout(() => {
            timedOut = true;
            socket.destroy();
            reject(new Error(`TLS handshake did not complete within ${this.#handshakeTimeoutMs} ms`));
          }, this.#handshakeTimeoutMs);
          timer.unref();
          inner.connect(socket).then(
            (result) => {
              clearTimeout(timer);
              if (timedOut || this.#destroyed) {
                result.socket.destroy();
                if (!timedOut) reject(new Error('channel closed'));
                return;
              }
              this.#track(result.socket);
              resolve(result);
            },
            (err: unknown) => {
              clearTimeout(timer);
              socket.destroy();
              reject(err);
            },
          );
        });
      },
      waitForReady: () => inner.waitForReady(),
      getCallCredentials: () => inner.getCallCredentials(),
      destroy: () => inner.destroy(),
    };
  }

  #track(socket: Socket): void {
    if (this.#sockets.has(socket)) return;
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }
}
