/**
 * The SPIFFE Broker API protos, loaded once: the gRPC service definition (via src/grpc) and a
 * protobufjs root for the message types that travel packed in `google.protobuf.Any`. The
 * contract itself (names, header, type URLs, message shapes) is src/protocol/spiffe-broker.ts.
 */
import type { ServiceDefinition } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import { loadProtos } from '../../../grpc/proto-load.js';
import { readableRequests } from '../../../grpc/request-guard.js';
import { serviceDefinitionOf } from '../../../grpc/typed-methods.js';
import { BROKER_PROTO, BROKER_SERVICE } from '../../../protocol/spiffe-broker.js';

/**
 * The `spiffe.broker.API` service definition. Request deserializers never throw: a request that
 * does not decode reaches the handler as an `UnreadableRequest` (answered INVALID_ARGUMENT).
 */
export function brokerServiceDefinition(): ServiceDefinition {
  return readableRequests(serviceDefinitionOf([BROKER_PROTO], BROKER_SERVICE));
}

/** The protobufjs type for `name` (e.g. KUBERNETES_REFERENCE_TYPE), from the shared root of the Broker API proto. */
export function brokerMessageType(name: string): protobuf.Type {
  return loadProtos([BROKER_PROTO]).root.lookupType(name);
}
