/**
 * Typed access to the grpc-js definitions built from `proto/` (src/grpc/service-definitions.ts):
 * a service's definition by its dotted name, and one method of it typed with the message shapes
 * that src/protocol writes down for that method. Clients call through grpc-js's own
 * `Client.makeUnaryRequest` / `makeServerStreamRequest` with a method's path and (de)serializers,
 * so no client object needs to be indexed by method name.
 */
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import { loadProtos, lookup } from './proto-load.js';

/** The grpc-js definition of `service` (`istio.v1.auth.IstioCertificateService`) from a proto set. */
export function serviceDefinitionOf(protoFiles: readonly string[], service: string): ServiceDefinition {
  return lookup<{ service: ServiceDefinition }>(loadProtos(protoFiles).grpcObject, service).service;
}

/**
 * `method` of `definition`, with its request and response typed as `Req` / `Res`. The
 * (de)serializers encode and decode with the .proto's own types, which the protocol types
 * describe; a method the definition lacks throws.
 */
export function typedMethod<Req, Res>(definition: ServiceDefinition, method: string): MethodDefinition<Req, Res> {
  const found = definition[method];
  if (!found) throw new Error(`method ${method} is not in the service definition`);
  return found;
}
