/**
 * `google.rpc.Status` with one `google.rpc.ErrorInfo`, as gRPC's richer error model carries it:
 * serialized into the binary trailer `grpc-status-details-bin` (grpc-js base64-encodes `-bin`
 * metadata on the wire). Encoded with protobufjs over our own proto/google/rpc/*.proto; decoded
 * strictly (src/grpc/strict-decode.ts): the bytes come from a peer, and a truncated Status is an
 * error, not a shortened message.
 */
import type protobuf from 'protobufjs';
import { ERROR_INFO_TYPE, ERROR_INFO_TYPE_URL, RPC_STATUS_PROTOS, RPC_STATUS_TYPE, STATUS_DETAILS_KEY, type ErrorInfo } from '../protocol/grpc-status.js';
import { protobufRoot } from './proto-load.js';
import { decodeStrict } from './strict-decode.js';

export { ERROR_INFO_TYPE_URL, STATUS_DETAILS_KEY, type ErrorInfo };

export interface RpcStatus {
  readonly code: number;
  readonly message: string;
  readonly errorInfo: ErrorInfo | undefined;
}

let types: { status: protobuf.Type; errorInfo: protobuf.Type } | undefined;

function rpcTypes(): { status: protobuf.Type; errorInfo: protobuf.Type } {
  if (!types) {
    const root = protobufRoot(RPC_STATUS_PROTOS);
    types = { status: root.lookupType(RPC_STATUS_TYPE), errorInfo: root.lookupType(ERROR_INFO_TYPE) };
  }
  return types;
}

/** The serialized google.rpc.Status{code, message, details: [Any(ErrorInfo)]}. */
export function encodeRpcStatus(status: { code: number; message: string; errorInfo: ErrorInfo }): Buffer {
  const { status: Status, errorInfo: Info } = rpcTypes();
  const info = Info.encode(
    Info.fromObject({ reason: status.errorInfo.reason, domain: status.errorInfo.domain, metadata: { ...(status.errorInfo.metadata ?? {}) } }),
  ).finish();
  const message = Status.fromObject({
    code: status.code,
    message: status.message,
    details: [{ type_url: ERROR_INFO_TYPE_URL, value: info }],
  });
  return Buffer.from(Status.encode(message).finish());
}

/** Decodes a `grpc-status-details-bin` value; the first ErrorInfo among the details, if any. Throws when the bytes (or the ErrorInfo) do not decode. */
export function decodeRpcStatus(bytes: Uint8Array): RpcStatus {
  const { status: Status, errorInfo: Info } = rpcTypes();
  const decoded = Status.toObject(decodeStrict(Status, bytes), { defaults: true }) as {
    code: number;
    message: string;
    details: Array<{ type_url: string; value: Uint8Array }>;
  };
  const any = decoded.details.find((d) => d.type_url === ERROR_INFO_TYPE_URL);
  const errorInfo = any
    ? (Info.toObject(decodeStrict(Info, any.value), { defaults: true }) as { reason: string; domain: string; metadata: Record<string, string> })
    : undefined;
  return { code: decoded.code, message: decoded.message, errorInfo };
}
