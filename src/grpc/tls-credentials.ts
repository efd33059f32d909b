/**
 * TLS credentials for certbroker's gRPC servers and clients, from PEM strings. Kept generic so
 * the CA and the broker build theirs the same way.
 */
import { ChannelCredentials, ServerCredentials } from '@grpc/grpc-js';
import type { Secret } from '../core/secret.js';

export interface ServerTlsOptions {
  /** Serving chain, leaf first. */
  readonly certChainPem: string;
  readonly privateKeyPem: Secret<string>;
  /** Roots that client certificates must chain to (mTLS); omit for server-only TLS. */
  readonly clientRootsPem?: string;
  /** Reject clients without a certificate (only meaningful with clientRootsPem). */
  readonly requireClientCert?: boolean;
}

export function serverTlsCredentials(options: ServerTlsOptions): ServerCredentials {
  const roots = options.clientRootsPem === undefined ? null : Buffer.from(options.clientRootsPem);
  return ServerCredentials.createSsl(
    roots,
    [{ cert_chain: Buffer.from(options.certChainPem), private_key: Buffer.from(options.privateKeyPem.reveal()) }],
    roots !== null && options.requireClientCert === true,
  );
}

export interface ChannelTlsOptions {
  readonly rootsPem: string;
  readonly clientCertChainPem?: string;
  readonly clientPrivateKeyPem?: Secret<string>;
}

export function channelTlsCredentials(options: ChannelTlsOptions): ChannelCredentials {
  const key = options.clientPrivateKeyPem === undefined ? null : Buffer.from(options.clientPrivateKeyPem.reveal());
  const cert = options.clientCertChainPem === undefined ? null : Buffer.from(options.clientCertChainPem);
  return ChannelCredentials.createSsl(Buffer.from(options.rootsPem), key, cert);
}
