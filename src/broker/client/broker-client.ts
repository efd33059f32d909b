/**
 * A Broker API client over the Unix socket with mTLS: for `certbroker fetch`, tests and the
 * benchmark. The server is verified by its SVID: it must chain to the given roots and carry a
 * SPIFFE ID of the expected trust domain (or exactly `expectedServerId`).
 */
import { X509Certificate } from 'node:crypto';
import type { PeerCertificate } from 'node:tls';
import { ChannelCredentials, Client, Metadata, type ClientReadableStream, type MethodDefinition } from '@grpc/grpc-js';
import { BoundedChannelCredentials } from '../../grpc/bounded-credentials.js';
import { healthServiceDefinition } from '../../grpc/health.js';
import type { Secret } from '../../core/secret.js';
import { serviceDefinitionOf, typedMethod } from '../../grpc/typed-methods.js';
import { HEALTH_CHECK_METHOD, WHOLE_SERVER, type HealthCheckRequest, type HealthCheckResponse } from '../../protocol/grpc-health.js';
import {
  BROKER_HEADER,
  BROKER_HEADER_VALUE,
  BROKER_METHOD,
  BROKER_PROTO,
  BROKER_SERVICE,
  type SubscribeToX509BundlesResponse,
  type SubscribeToX509SVIDResponse,
  type WorkloadRequest,
} from '../../protocol/spiffe-broker.js';
import { uriSans } from '../../pki/x509-fields.js';
import { encodePidReference, encodePodReference, type PodReference } from '../fronts/broker-api/workload-reference.js';

/** What a client names: a pod (by UID, namespace/name, or both) or a process of the node. */
export type ClientReference = Partial<PodReference> | { readonly pid: number };

export interface ClientStreamOptions {
  /** Send `broker.spiffe.io: true` (default true). */
  readonly header?: boolean;
  /** The reference's type URL (its package: `spiffe.broker` by default, or `spiffe.reference`). */
  readonly typeUrl?: string;
}

export interface BrokerClientOptions {
  readonly socketPath: string;
  readonly rootsPem: string;
  readonly certChainPem: string;
  readonly privateKeyPem: Secret<string>;
  /** Accept only this server SPIFFE ID; otherwise any ID in `trustDomain`. */
  readonly expectedServerId?: string;
  readonly trustDomain: string;
}

/** A method of `spiffe.broker.API` from the proto's own definition. */
function brokerMethod<Res>(name: string): MethodDefinition<WorkloadRequest, Res> {
  return typedMethod(serviceDefinitionOf([BROKER_PROTO], BROKER_SERVICE), name);
}

/** A client constructor on the broker socket: grpc-js's `Client`, or a service client class. */
export type ClientConstructor<C extends Client> = new (address: string, credentials: ChannelCredentials) => C;

export class BrokerClient {
  readonly client: Client;
  readonly #target: string;
  readonly #credentials: BoundedChannelCredentials;

  constructor(options: BrokerClientOptions) {
    const checkServerIdentity = (_host: string, cert: PeerCertificate): Error | undefined => {
      const id = spiffeIdOf(cert.raw);
      if (id === undefined) return new Error('broker presented no SPIFFE ID');
      if (options.expectedServerId !== undefined ? id !== options.expectedServerId : !id.startsWith(`spiffe://${options.trustDomain}/`)) {
        return new Error(`unexpected broker identity ${id}`);
      }
      return undefined;
    };
    const credentials = new BoundedChannelCredentials(
      ChannelCredentials.createSsl(Buffer.from(options.rootsPem), Buffer.from(options.privateKeyPem.reveal()), Buffer.from(options.certChainPem), {
        checkServerIdentity,
      }),
    );
    this.#target = `unix://${options.socketPath}`;
    this.#credentials = credentials;
    this.client = new Client(this.#target, credentials, {});
  }

  /**
   * A client of another service on the broker socket (health, reflection), with this client's
   * mTLS credentials and server check. The caller closes it.
   */
  serviceClient<C extends Client>(Ctor: ClientConstructor<C>): C {
    return new Ctor(this.#target, this.#credentials);
  }

  /** grpc.health.v1 Check on the broker socket ('' = the whole server), on a channel of its own. */
  health(service = WHOLE_SERVER): Promise<string> {
    const client = this.serviceClient(Client);
    const check = typedMethod<HealthCheckRequest, HealthCheckResponse>(healthServiceDefinition(), HEALTH_CHECK_METHOD);
    return new Promise<string>((resolve, reject) =>
      client.makeUnaryRequest(check.path, check.requestSerialize, check.responseDeserialize, { service }, (e, res) => {
        client.close();
        if (e) reject(e);
        else resolve(res?.status ?? 'UNKNOWN');
      }),
    );
  }

  /** `ref`: a pod (by UID, namespace/name, or both) or a process (`{ pid }`); `typeUrl` picks the reference package (`spiffe.broker` by default). */
  subscribeX509Svid(ref: ClientReference, options: ClientStreamOptions = {}): ClientReadableStream<SubscribeToX509SVIDResponse> {
    return this.#stream(brokerMethod<SubscribeToX509SVIDResponse>(BROKER_METHOD.subscribeToX509Svid), ref, options);
  }

  subscribeX509Bundles(ref: ClientReference, options: ClientStreamOptions = {}): ClientReadableStream<SubscribeToX509BundlesResponse> {
    return this.#stream(brokerMethod<SubscribeToX509BundlesResponse>(BROKER_METHOD.subscribeToX509Bundles), ref, options);
  }

  /** Closes the channel and destroys its connections (service clients' too). */
  close(): void {
    this.client.close();
    this.#credentials.destroyAll();
  }

  #stream<Res>(method: MethodDefinition<WorkloadRequest, Res>, ref: ClientReference, options: ClientStreamOptions): ClientReadableStream<Res> {
    const md = new Metadata();
    if (options.header !== false) md.set(BROKER_HEADER, BROKER_HEADER_VALUE);
    const packed = 'pid' in ref ? encodePidReference(ref.pid, ...(options.typeUrl ? [options.typeUrl] : [])) : encodePodReference(ref, ...(options.typeUrl ? [options.typeUrl] : []));
    const request: WorkloadRequest = { reference: { reference: packed } };
    return this.client.makeServerStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, request, md);
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
