/**
 * Server TLS credentials whose certificate can be replaced while the server runs (a CA's
 * serving certificate is issued by its own signer and rotates with it). Built on grpc-js's
 * CertificateProvider hook: new connections get the new certificate, open ones keep theirs.
 * `withdraw()` takes the identity away (a certificate that expired is never presented): grpc-js
 * then drops new connections, as it does before the first identity.
 */
import { experimental, type ServerCredentials } from '@grpc/grpc-js';
import type { Secret } from '../core/secret.js';

type IdentityListener = (update: { certificate: Buffer; privateKey: Buffer } | null) => void;
type CaListener = (update: { caCertificate: Buffer } | null) => void;

export class RotatingServerIdentity {
  #latest: { certificate: Buffer; privateKey: Buffer } | null = null;
  readonly #listeners = new Set<IdentityListener>();

  /** Replaces the serving chain (leaf first) and key; listeners (live servers) pick it up. */
  update(certChainPem: string, privateKeyPem: Secret<string>): void {
    this.#latest = { certificate: Buffer.from(certChainPem), privateKey: Buffer.from(privateKeyPem.reveal()) };
    for (const l of this.#listeners) l(this.#latest);
  }

  /** No identity any more (e.g. the last one expired): listeners get null, new handshakes fail. */
  withdraw(): void {
    if (this.#latest === null) return;
    this.#latest = null;
    for (const l of this.#listeners) l(null);
  }

  /** The current identity as PEM buffers (null before the first update and after `withdraw`). */
  current(): { certificate: Buffer; privateKey: Buffer } | null {
    return this.#latest;
  }

  /** Calls `listener` on every later update (null: withdrawn); returns an unsubscribe function. */
  onUpdate(listener: (identity: { certificate: Buffer; privateKey: Buffer } | null) => void): () => void {
    const l: IdentityListener = (u) => listener(u);
    this.#listeners.add(l);
    return () => this.#listeners.delete(l);
  }

  get hasIdentity(): boolean {
    return this.#latest !== null;
  }

  /** Server credentials that always present the latest identity (server-side TLS only). */
  credentials(): ServerCredentials {
    const provider: experimental.CertificateProvider = {
      addIdentityCertificateListener: (l: IdentityListener) => {
        this.#listeners.add(l);
        // grpc-js registers the server's watcher only after this call returns, so the current
        // identity is delivered on the next microtask (a synchronous call would be lost).
        queueMicrotask(() => {
          if (this.#listeners.has(l)) l(this.#latest);
        });
      },
      removeIdentityCertificateListener: (l: IdentityListener) => {
        this.#listeners.delete(l);
      },
      addCaCertificateListener: (_l: CaListener) => undefined,
      removeCaCertificateListener: (_l: CaListener) => undefined,
    };
    // grpc-js 1.14 declares this function's parameters as (ca, identity) but passes them to a
    // constructor that takes (identity, ca): the first argument is used as the identity
    // provider. The CA tests (real TLS handshakes, rotation) guard this ordering.
    return experimental.createCertificateProviderServerCredentials(provider, null, false);
  }
}
