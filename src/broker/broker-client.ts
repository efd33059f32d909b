/**
 * A Broker API client over the Unix socket with mTLS: for `certbroker fetch`, tests and the
 * benchmark. The server is verified by its SVID: it must chain to the given roots and carry a
 * SPIFFE ID of the expected trust domain (or exactly `expectedServerId`).
 */
import { X509Certificate } from 'node:crypto';
import type { PeerCertificate } from 'node:tls';
import {
  ChannelCredentials,
  makeGenericClientConstructor,
  Metadata,
  type Client,
  type ClientReadableStream,
  type ServiceClientConstructor,
  type ServiceError,
} from '@grpc/grpc-js';
import { healthServiceDefinition } from '../grpc/health.js';
import type { Secret } from '../core/secret.js';
import { loadProtos, lookup } from '../grpc/proto-load.js';
import { BROKER_HEADER, BROKER_PROTO, BROKER_SERVICE } from './broker-proto.js';
import { uriSans } from './x509-fields.js';
import { encodePodReference, type PodReference } from './workload-reference.js';

export interface BrokerClientOptions {
  readonly socketPath: string;
  readonly rootsPem: string;
  readonly certChainPem: string;
  readonly privateKeyPem: Secret<string>;
  /** Accept only this server SPIFFE ID; otherwise any ID in `trustDomain`. */
  readonly expectedServerId?: string;
  readonly trustDomain: string;
}

export interface X509SvidMessage {
  readonly spiffe_id: string;
  readonly x509_svid: Buffer;
  readonly x509_svid_key: Buffer;
  readonly bundle: Buffer;
  readonly hint: string;
}

export interface X509SvidResponse {
  readonly svids: readonly X509SvidMessage[];
}

export interface X509BundlesResponse {
  readonly bundles: Readonly<Record<string, Buffer>>;
}

type StreamMethod<T> = (request: unknown, metadata: Metadata) => ClientReadableStream<T>;

export class BrokerClient {
  readonly client: Client;
  readonly #target: string;
  readonly #credentials: ChannelCredentials;

  constructor(options: BrokerClientOptions) {
    const { grpcObject } = loadProtos([BROKER_PROTO]);
    const Ctor = lookup<ServiceClientConstructor>(grpcObject, BROKER_SERVICE);
    const checkServerIdentity = (_host: string, cert: PeerCertificate): Error | undefined => {
      const id = spiffeIdOf(cert.raw);
      if (id === undefined) return new Error('broker presented no SPIFFE ID');
      if (options.expectedServerId !== undefined ? id !== options.expectedServerId : !id.startsWith(`spiffe://${options.trustDomain}/`)) {
        return new Error(`unexpected broker identity ${id}`);
      }
      return undefined;
    };
    const credentials = ChannelCredentials.createSsl(
      Buffer.from(options.rootsPem),
      Buffer.from(options.privateKeyPem.reveal()),
      Buffer.from(options.certChainPem),
      { checkServerIdentity },
    );
    this.#target = `unix://${options.socketPath}`;
    this.#credentials = credentials;
    this.client = new Ctor(this.#target, credentials, {});
  }

  /**
   * A client of another service on the broker socket (health, reflection), with this client's
   * mTLS credentials and server check. The caller closes it.
   */
  serviceClient<C extends Client>(Ctor: ServiceClientConstructor): C {
    return new Ctor(this.#target, this.#credentials) as unknown as C;
  }

  /** grpc.health.v1 Check on the broker socket ('' = the whole server). */
  health(service = ''): Promise<string> {
    const client = this.serviceClient<Client & {
      Check(req: { service: string }, cb: (e: ServiceError | null, res?: { status: string }) => void): void;
    }>(makeGenericClientConstructor(healthServiceDefinition(), 'Health'));
    return new Promise<string>((resolve, reject) =>
      client.Check({ service }, (e, res) => {
        client.close();
        if (e) reject(e);
        else resolve(res?.status ?? 'UNKNOWN');
      }),
    );
  }

  subscribeX509Svid(ref: Partial<PodReference>, options: { header?: boolean } = {}): ClientReadableStream<X509SvidResponse> {
    return this.#stream<X509SvidResponse>('SubscribeToX509SVID', ref, options);
  }

  subscribeX509Bundles(ref: Partial<PodReference>, options: { header?: boolean } = {}): ClientReadableStream<X509BundlesResponse> {
    return this.#stream<X509BundlesResponse>('SubscribeToX509Bundles', ref, options);
  }

  close(): void {
    this.client.close();
  }

  #stream<T>(method: string, ref: Partial<PodReference>, options: { header?: boolean }): ClientReadableStream<T> {
    const md = new Metadata();
    if (options.header !== false) md.set(BROKER_HEADER, 'true');
    const fn = (this.client as unknown as Record<string, StreamMethod<T>>)[method]!.bind(this.client);
    return fn({ reference: { reference: encodePodReference(ref) } }, md);
  }
}

/**
 * Resolves with the first message of a stream (rejects with the stream's error), leaving it
 * open; later errors of the stream (its cancellation, a shutdown) are the caller's business and
 * are not thrown as uncaught exceptions.
 */
export function firstMessage<T>(stream: ClientReadableStream<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    const onData = (m: T) => {
      stream.off('error', onError);
      stream.off('data', onData);
      stream.on('error', () => undefined);
      resolve(m);
    };
    const onError = (e: unknown) => {
      stream.off('data', onData);
      reject(e);
    };
    stream.on('data', onData);
    stream.once('error', onError);
  });
}

function spiffeIdOf(raw: Buffer | undefined): string | undefined {
  if (!raw) return undefined;
  const uris = uriSans(new X509Certificate(raw));
  return uris.length === 1 ? uris[0] : undefined;
}
