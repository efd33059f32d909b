/**
 * The TLS connection to the API server, opened before the HTTP request is handed a socket, so
 * nothing (not even the bearer token) is written until the server's certificate is trusted.
 *
 * With a kubeconfig CA the context has no trust store (`ca: []`: Node builds no root store, see
 * server-chain.ts) and the chain is checked by `verifyServerChain` on `secureConnect`; a chain it
 * refuses destroys the socket. With `insecure-skip-tls-verify` nothing is checked, as before;
 * with neither, Node verifies against its bundled roots (its own checks, its own cost).
 */
import { connect, type TLSSocket } from 'node:tls';
import { isIP } from 'node:net';
import type { X509Certificate } from 'node:crypto';
import type { Clock } from '../../core/clock.js';
import type { KubeAccess } from './kubeconfig.js';
import { verifyServerChain } from './server-chain.js';

export interface ApiTlsOptions {
  readonly access: KubeAccess;
  /** The kubeconfig CA, parsed (undefined: none configured). */
  readonly anchors: readonly X509Certificate[] | undefined;
  readonly host: string;
  readonly port: number;
  readonly clock: Clock;
  /** Aborting destroys the socket, also during the handshake. */
  readonly signal: AbortSignal;
}

/** The DER certificates the server sent, leaf first, in the order Node linked them. */
function sentChain(socket: TLSSocket): Buffer[] {
  const out: Buffer[] = [];
  const seen = new Set<string>();
  let cert = socket.getPeerCertificate(true);
  while (cert && cert.raw && !seen.has(cert.fingerprint256)) {
    seen.add(cert.fingerprint256);
    out.push(cert.raw);
    cert = cert.issuerCertificate;
  }
  return out;
}

/**
 * A TLS socket to the API server whose certificate has been checked (or whose checking the
 * kubeconfig turned off). `onSocket` is called exactly once: with no error and the socket, or with
 * the failure (and the socket, destroyed: node:http's `createConnection` callback shape).
 */
export function connectApiServer(o: ApiTlsOptions, onSocket: (err: Error | null, socket: TLSSocket) => void): TLSSocket {
  const { access, anchors } = o;
  const ownCheck = anchors !== undefined && !access.insecureSkipTlsVerify;
  const socket = connect({
    host: o.host,
    port: o.port,
    ...(isIP(o.host) === 0 ? { servername: o.host } : {}),
    ALPNProtocols: ['http/1.1'],
    ...(ownCheck ? { ca: [], rejectUnauthorized: false } : { rejectUnauthorized: !access.insecureSkipTlsVerify }),
    ...(access.clientCert ? { cert: access.clientCert.certPem, key: access.clientCert.keyPem.reveal() } : {}),
  });
  let done = false;
  const onAbort = (): void => finish(o.signal.reason instanceof Error ? o.signal.reason : new Error('aborted'));
  // Stays attached: once the request owns the socket, it listens too; before that, this reports.
  const finish = (err: Error | null): void => {
    if (done) return;
    done = true;
    o.signal.removeEventListener('abort', onAbort);
    if (err) {
      socket.destroy();
      onSocket(err, socket);
    } else onSocket(null, socket);
  };
  socket.on('error', finish);
  if (o.signal.aborted) onAbort();
  else o.signal.addEventListener('abort', onAbort, { once: true });
  socket.once('secureConnect', () => {
    if (!ownCheck) return finish(null);
    try {
      verifyServerChain({ chainDer: sentChain(socket), peer: socket.getPeerCertificate(), host: o.host, anchors, nowMs: o.clock.now() });
    } catch (err) {
      return finish(err instanceof Error ? err : new Error(String(err)));
    }
    finish(null);
  });
  return socket;
}
