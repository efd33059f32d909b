/**
 * The Istio CA front's forward to the CA (a `CsrForwarder`): `CreateCertificate` for a CSR the
 * broker did not make (ztunnel's key), always as `ImpersonatedIdentity`, with the broker's own
 * token and `clusterid`, over the lean node:http2 client (src/grpc/h2-unary-channel.ts: one kept
 * TLS session verified against the mesh root for `tlsServerName`, re-opened after GOAWAY, a
 * close, a failure or a deadline; `callTimeoutMs` per call; a caller that goes away cancels the
 * call). The request and response are encoded with protobufjs over the CA's own .proto; the
 * answer is checked by `checkForwardedChain`. A refusal is a `CaCallError` (its `grpcCode`; the
 * CA's message as `cause.details`), as from the grpc-js client.
 */
import type protobuf from 'protobufjs';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { H2UnaryChannel } from '../../grpc/h2-unary-channel.js';
import { protobufRoot } from '../../grpc/proto-load.js';
import { stringStruct } from '../../grpc/struct-value.js';
import {
  AUTHORIZATION_METADATA,
  bearerAuthorization,
  CA_PROTO,
  CERTIFICATE_REQUEST_TYPE,
  CERTIFICATE_RESPONSE_TYPE,
  CLUSTER_ID_METADATA,
  CREATE_CERTIFICATE_PATH,
  IMPERSONATED_IDENTITY_KEY,
  type IstioCertificateResponse,
} from '../../protocol/istio-ca.js';
import { CaCallError, type IstioCaClientOptions } from './ca-client.js';
import { checkForwardedChain, type ForwardedChain } from './forwarded-chain.js';

export type CaForwarderOptions = Pick<IstioCaClientOptions, 'address' | 'caRootsPem' | 'tlsServerName' | 'tokens' | 'clusterId' | 'callTimeoutMs' | 'handshakeTimeoutMs'>;

interface Codec {
  readonly request: protobuf.Type;
  readonly response: protobuf.Type;
}

let codec: Codec | undefined;

function codecOf(): Codec {
  if (codec) return codec;
  const root = protobufRoot([CA_PROTO]);
  codec = { request: root.lookupType(CERTIFICATE_REQUEST_TYPE), response: root.lookupType(CERTIFICATE_RESPONSE_TYPE) };
  return codec;
}

export class CaForwarder {
  readonly #o: CaForwarderOptions;
  readonly #channel: H2UnaryChannel;
  readonly #codec = codecOf();

  constructor(options: CaForwarderOptions) {
    this.#o = options;
    this.#channel = new H2UnaryChannel({
      address: options.address,
      rootsPem: options.caRootsPem,
      ...(options.tlsServerName ? { serverName: options.tlsServerName } : {}),
      handshakeTimeoutMs: options.handshakeTimeoutMs ?? 10_000,
    });
  }

  /**
   * Asks the CA to sign `csrPem` for `identity` (`ttlSeconds` as asked, 0 = the CA's default).
   * Returns the CA's `cert_chain` as it came once `checkForwardedChain` accepts it, with the
   * leaf's SPKI for the caller to compare with the CSR's.
   */
  async forwardCsr(request: { readonly csrPem: string; readonly identity: string; readonly ttlSeconds: number }, signal: AbortSignal): Promise<ForwardedChain> {
    const token = await this.#o.tokens.token(signal);
    const { request: Req, response: Res } = this.#codec;
    const message = Req.encode(
      Req.fromObject({ csr: request.csrPem, validity_duration: request.ttlSeconds, metadata: stringStruct({ [IMPERSONATED_IDENTITY_KEY]: request.identity }) }),
    ).finish();
    const result = await this.#channel.call({
      path: CREATE_CERTIFICATE_PATH,
      metadata: { [AUTHORIZATION_METADATA]: bearerAuthorization(token.reveal()), [CLUSTER_ID_METADATA]: this.#o.clusterId },
      message,
      timeoutMs: this.#o.callTimeoutMs ?? 10_000,
      signal,
    });
    if (result.code !== GrpcStatus.OK) throw CaCallError.fromStatus(result.code, result.details, { code: result.code, details: result.details });
    let response: Partial<IstioCertificateResponse>;
    try {
      response = Res.toObject(Res.decode(result.message!), { arrays: true }) as Partial<IstioCertificateResponse>;
    } catch (err) {
      throw CaCallError.fromStatus(GrpcStatus.INTERNAL, 'the CA answer is not an IstioCertificateResponse', err);
    }
    return checkForwardedChain(response, request.identity);
  }

  /** Verifies the CA against `rootsPem` from the next session on (see `IstioCaClient.trustRoots`). */
  trustRoots(rootsPem: string): void {
    this.#channel.trustRoots(rootsPem);
  }

  /** Closes the session. */
  close(): void {
    this.#channel.close();
  }
}
