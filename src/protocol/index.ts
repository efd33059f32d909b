/**
 * protocol — the wire contracts certbroker speaks, each written once and used by both ends:
 * names, paths, headers, metadata keys, type URLs, default values fixed by a standard or by
 * Istio, and the TypeScript shapes of the messages. Pure constants, types and tiny codecs: this
 * room imports nothing outside itself (the CNI plugin, a short-lived process, imports
 * `cni-event.ts` directly).
 *
 * | file | contract | ends |
 * |---|---|---|
 * | `istio-ca.ts` | Istio's `IstioCertificateService` | broker CA client; CA certificate service and http2 transport |
 * | `cni-event.ts` | Istio's `CNIPluginAddEvent` (`POST /cmdadd` on `pluginevent.sock`) | CNI plugin; broker registration server |
 * | `grpc-health.ts` | `grpc.health.v1.Health` | every server; health clients |
 * | `grpc-status.ts` | `google.rpc.Status`/`ErrorInfo` trailers, certbroker's error-code trailer | `toGrpcError`; clients reading refusals |
 * | `protobuf-types.ts` | google.protobuf `Struct`, `Value`, `Any` as decoded; type URLs | every message type above |
 */
export * from './istio-ca.js';
export * from './cni-event.js';
export * from './grpc-health.js';
export * from './grpc-status.js';
export * from './protobuf-types.js';
