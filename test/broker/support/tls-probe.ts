/**
 * One TLS handshake to a Broker API socket as a consumer starts it (client certificate, h2
 * ALPN), except that it accepts ANY server certificate (rejectUnauthorized: false): it reports
 * what the server presented, so a test sees an expired certificate instead of a client refusal.
 */
import { connect } from 'node:tls';
import type { Secret } from '../../../src/core/secret.js';

export type Handshake =
  | { readonly ok: true; readonly serial: string; readonly validTo: number }
  | { readonly ok: false; readonly error: string };

export function probeHandshake(
  socketPath: string,
  client: { readonly rootsPem: string; readonly certChainPem: string; readonly privateKeyPem: Secret<string> },
): Promise<Handshake> {
  return new Promise((resolve) => {
    const socket = connect({
      path: socketPath,
      ca: client.rootsPem,
      cert: client.certChainPem,
      key: client.privateKeyPem.reveal(),
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
    });
    const done = (h: Handshake) => {
      socket.destroy();
      resolve(h);
    };
    socket.once('secureConnect', () => {
      const peer = socket.getPeerX509Certificate();
      done(peer ? { ok: true, serial: peer.serialNumber.toLowerCase(), validTo: Date.parse(peer.validTo) } : { ok: false, error: 'no peer certificate' });
    });
    socket.once('error', (err: Error & { code?: string }) => done({ ok: false, error: err.code ?? err.message }));
    socket.once('close', () => done({ ok: false, error: 'closed before the handshake' }));
  });
}
