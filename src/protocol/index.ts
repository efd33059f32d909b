/**
 * protocol — the wire contracts certbroker speaks, each written once and used by both ends:
 * names, paths, headers, metadata keys, type URLs, default values fixed by a standard or by
 * Istio, and the TypeScript shapes of the messages. Pure constants, types and tiny codecs: this
 * room imports nothing outside itself (the CNI plugin, a short-lived process, imports
 * `cni-event.ts` directly). Each protocol is a namespace here (`protocol.spiffeBroker.BROKER_HEADER`)
 * since the standards reuse message names (`X509SVID`); code imports the file it speaks.
 *
 * | file | contract | ends |
 * |---|---|---|
 * | `spiffe-broker.ts` | the SPIFFE Broker API `spiffe.broker.API` | broker Broker API service and server; Broker API client, reference codec |
 * | `workload-api.ts` | the SPIFFE Workload API `SpiffeWorkloadAPI` | the Workload API front (next) and its clients |
 * | `istio-ca.ts` | Istio's `IstioCertificateService` | broker CA client; CA certificate service and http2 transport |
 * | `cni-event.ts` | Istio's `CNIPluginAddEvent` (`POST /cmdadd` on `pluginevent.sock`) | CNI plugin; broker registration server |
 * | `grpc-health.ts` | `grpc.health.v1.Health` | every server; health clients |
 * | `grpc-status.ts` | `google.rpc.Status`/`ErrorInfo` trailers, certbroker's error-code trailer | `toGrpcError`; clients reading refusals |
 * | `protobuf-types.ts` | google.protobuf `Struct`, `Value`, `Any` as decoded; type URLs | every message type above |
 */
export * as istioCa from './istio-ca.js';
export * as spiffeBroker from './spiffe-broker.js';
export * as workloadApi from './workload-api.js';
export * as cniEvent from './cni-event.js';
export * as grpcHealth from './grpc-health.js';
export * as grpcStatus from './grpc-status.js';
export * as protobufTypes from './protobuf-types.js';
