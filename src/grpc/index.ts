/**
 * Generic gRPC adapters shared by certbroker's servers and clients: proto loading,
 * google.protobuf.Struct helpers, rotating server identities, the grpc.health.v1 service, reflection, and
 * bind/stop with a graceful-then-forced deadline. Error mapping lives in `src/ops/grpc-errors.ts`.
 */
export { loadProtos, lookup, protoRootFor, protobufRoot, type LoadedProto, type LoadProtosOptions } from './proto-load.js';
export { MESSAGE_OBJECT_OPTIONS, servicesPackageDefinition } from './service-definitions.js';
export { decodeStrict, StrictReader } from './strict-decode.js';
export { structString, stringStruct, type ProtoStruct, type ProtoValue } from './struct-value.js';
export { HealthService, HEALTH_PROTO, healthServiceDefinition, type ServingStatus } from './health.js';
export { addReflection } from './reflection.js';
export { bindServer, stopServer } from './server-lifecycle.js';
export { RotatingServerIdentity } from './rotating-credentials.js';
export { decodeRpcStatus, encodeRpcStatus, ERROR_INFO_TYPE_URL, STATUS_DETAILS_KEY, type ErrorInfo, type RpcStatus } from './rpc-status.js';
export { compressionFlagGuard, isUnreadableRequest, readableRequests, UnreadableRequest } from './request-guard.js';
export { frame, grpcMessage, grpcTimeoutHeader, grpcTimeoutMs, parseGrpcMessage } from './wire-format.js';
export { H2UnaryChannel, type H2UnaryChannelOptions, type UnaryCallOptions, type UnaryResult } from './h2-unary-channel.js';
export { CA_DNS_MIN_RERESOLVE_MS, caServiceConfig, parseCaTarget, type CaEndpoint, type CaTarget } from './ca-target.js';
export { parseRetryPushbackMs, retryPushbackOf, retryPushbackValue, RETRY_PUSHBACK_METADATA } from './retry-pushback.js';
export { decodeIstioCertificateRequest, MalformedMessage } from './istio-ca-request.js';
