/**
 * gRPC's richer error model as certbroker's servers send it: a `google.rpc.Status` holding one
 * `google.rpc.ErrorInfo`, serialized into the `grpc-status-details-bin` trailer; and
 * certbroker's own trailer naming the `ERR_*` code of a refusal.
 */
import { typeUrlOf } from './protobuf-types.js';

/** The .proto files of google.rpc.Status and its details, relative to `proto/`. */
export const RPC_STATUS_PROTOS: readonly string[] = Object.freeze(['google/rpc/status.proto', 'google/rpc/error_details.proto']);
export const RPC_STATUS_TYPE = 'google.rpc.Status';
/** Trailer holding the serialized google.rpc.Status (grpc-js base64-encodes `-bin` values). */
export const STATUS_DETAILS_KEY = 'grpc-status-details-bin';
export const ERROR_INFO_TYPE = 'google.rpc.ErrorInfo';
export const ERROR_INFO_TYPE_URL = typeUrlOf(ERROR_INFO_TYPE);
/** Trailer with the certbroker error code (`ERR_CA_NO_TOKEN`, ...) of a refused call. */
export const ERROR_CODE_METADATA = 'certbroker-error-code';
/**
 * Server pushback (gRFC A6): the server asks the client to wait this many milliseconds (a
 * non-negative decimal integer) before trying the call again; sent with RESOURCE_EXHAUSTED when
 * the CA sheds load.
 */
export const RETRY_PUSHBACK_METADATA = 'grpc-retry-pushback-ms';
/** ErrorInfo domain of refusals that no standard gives a reason to. */
export const CERTBROKER_ERROR_DOMAIN = 'certbroker';

/** google.rpc.ErrorInfo. */
export interface ErrorInfo {
  /** UPPER_SNAKE_CASE, stable within `domain`. */
  readonly reason: string;
  readonly domain: string;
  readonly metadata?: Readonly<Record<string, string>>;
}
