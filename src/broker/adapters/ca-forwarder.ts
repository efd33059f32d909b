/**
 * The Istio CA front's forward to the CA (a `CsrForwarder`): `CreateCertificate` for a CSR the
 * broker did not make (ztunnel's key), always as `ImpersonatedIdentity`, with the broker's own
 * token and `clusterid`, over the lean node:http2 client (src/grpc/h2-unary-channel.ts: one kept
 * TLS session verified against the mesh root for `tlsServerName`, re-opened after GOAWAY, a
 * close, a failure or a deadline; `callTimeoutMs` per call; a caller that goes away cancels the
 * call). The request and response are encoded with protobufjs over the CA's own .proto; the
 * answer is checked by `checkForwardedChain` as soon as its message is in (before the CA's status arrives; used once it is OK); the request is written by hand (`forwardRequestBytes`). A refusal is a `CaCallError` (its `grpcCode`; the
 * CA's message as `cause.details`), as from the grpc-js client.
 */
import type protobuf from 'protobufjs';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { H2UnaryChannel } from '../../grpc/h2-unary-channel.js';
import { protobufRoot } from '../../grpc/proto-load.js';
import { decodeStrict } from '../../grpc/strict-decode.js';
import {
  AUTHORIZATION_METADATA,
  bearerAuthorization,
  CA_PROTO,
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
  readonly response: protobuf.Type;
}

let codec: Codec | undefined;

function codecOf(): Codec {
  codec ??= { response: protobufRoot([CA_PROTO]).lookupType(CERTIFICATE_RESPONSE_TYPE) };
  return codec;
}

/** Bytes of `n` (a non-negative safe integer) as a protobuf varint. */
function varintBytes(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return out;
}

/** A length-delimited field: tag, length, bytes. */
function field(tag: number, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag, ...varintBytes(body.length)]), body]);
}

/**
 * The IstioCertificateRequest the front forwards, written by hand (a few µs; protobufjs'
 * fromObject + encode of the Struct costs ~17 µs a call): `csr` (1), `validity_duration` (3,
 * omitted when 0, as protobuf does; 2 is reserved), `metadata` (4) = Struct{ fields (1): map entry { key (1) =
 * ImpersonatedIdentity, value (2) = Value{ string_value (3) = identity } } }. Tested against
 * protobufjs decoding of the CA's .proto.
 */
export function forwardRequestBytes(request: { readonly csrPem: string; readonly identity: string; readonly ttlSeconds: number }): Buffer {
  const value = field(0x1a, Buffer.from(request.identity, 'utf8'));
  const entry = Buffer.concat([field(0x0a, Buffer.from(IMPERSONATED_IDENTITY_KEY, 'utf8')), field(0x12, value)]);
  const struct = field(0x0a, entry);
  const ttl = request.ttlSeconds > 0 ? Buffer.from([0x18, ...varintBytes(request.ttlSeconds)]) : Buffer.alloc(0);
  return Buffer.concat([field(0x0a, Buffer.from(request.csrPem, 'utf8')), ttl, field(0x22, struct)]);
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
    const result = await this.#channel.call({
      path: CREATE_CERTIFICATE_PATH,
      metadata: { [AUTHORIZATION_METADATA]: bearerAuthorization(token.reveal()), [CLUSTER_ID_METADATA]: this.#o.clusterId },
      message: forwardRequestBytes(request),
      timeoutMs: this.#o.callTimeoutMs ?? 10_000,
      signal,
      // Decoded and checked as soon as the message is in, while the CA's status is on its way;
      // used only once that status is OK.
      early: (message) => this.#checked(message, request.identity),
    });
    if (result.code !== GrpcStatus.OK) throw CaCallError.fromStatus(result.code, result.details, { code: result.code, details: result.details }, result.retryAfterMs);
    const answer = result.early!;
    if (!answer.ok) throw answer.error;
    return answer.value;
  }

  /** The CA's answer decoded and accepted by `checkForwardedChain` (throws otherwise). */
  #checked(message: Buffer, identity: string): ForwardedChain {
    const Res = this.#codec.response;
    let response: Partial<IstioCertificateResponse>;
    try {
      response = Res.toObject(decodeStrict(Res, message), { arrays: true }) as Partial<IstioCertificateResponse>;
    } catch (err) {
      throw CaCallError.fromStatus(GrpcStatus.INTERNAL, 'the CA answer is not an IstioCertificateResponse', err);
    }
    return checkForwardedChain(response, identity);
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
