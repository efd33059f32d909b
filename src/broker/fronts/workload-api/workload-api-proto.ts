/**
 * The SPIFFE Workload API service definition (`SpiffeWorkloadAPI`, proto/spiffe/workload/workload.proto),
 * loaded once through src/grpc. The contract (names, header, message shapes) is
 * src/protocol/workload-api.ts.
 */
import type { ServiceDefinition } from '@grpc/grpc-js';
import { readableRequests } from '../../../grpc/request-guard.js';
import { serviceDefinitionOf } from '../../../grpc/typed-methods.js';
import { WORKLOAD_API_PROTO, WORKLOAD_API_SERVICE } from '../../../protocol/workload-api.js';

/** Request deserializers never throw: a request that does not decode reaches the handler as an `UnreadableRequest`. */
export function workloadApiServiceDefinition(): ServiceDefinition {
  return readableRequests(serviceDefinitionOf([WORKLOAD_API_PROTO], WORKLOAD_API_SERVICE));
}
