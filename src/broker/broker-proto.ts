/**
 * The SPIFFE Broker API protos, loaded once: the gRPC service definition (via src/grpc) and a
 * protobufjs root for the message types that travel packed in `google.protobuf.Any`.
 */
import type { ServiceDefinition } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import { loadProtos, lookup } from '../grpc/proto-load.js';
import { readableRequests } from '../grpc/request-guard.js';
import { typeUrlOf } from '../protocol/protobuf-types.js';

export const BROKER_PROTO = 'spiffe/broker/broker.proto';
export const BROKER_SERVICE = 'spiffe.broker.API';
export const KUBERNETES_REFERENCE_TYPE = 'spiffe.broker.KubernetesObjectReference';
export const KUBERNETES_REFERENCE_TYPE_URL = typeUrlOf(KUBERNETES_REFERENCE_TYPE);
/** The header every Broker API request must carry (value `true`). */
export const BROKER_HEADER = 'broker.spiffe.io';

/**
 * The `spiffe.broker.API` service definition. Request deserializers never throw: a request that
 * does not decode reaches the handler as an `UnreadableRequest` (answered INVALID_ARGUMENT).
 */
export function brokerServiceDefinition(): ServiceDefinition {
  const { grpcObject } = loadProtos([BROKER_PROTO]);
  return readableRequests(lookup<{ service: ServiceDefinition }>(grpcObject, BROKER_SERVICE).service);
}

/** The protobufjs type for `name` (e.g. KUBERNETES_REFERENCE_TYPE), from the shared root of the Broker API proto. */
export function brokerMessageType(name: string): protobuf.Type {
  return loadProtos([BROKER_PROTO]).root.lookupType(name);
}
