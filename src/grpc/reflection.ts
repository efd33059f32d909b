/**
 * gRPC server reflection (v1 and v1alpha, via @grpc/reflection) over the same protos the server
 * loaded, so `grpcurl -insecure host:port list` works without local .proto files.
 */
import type { Server } from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { loadProtos } from './proto-load.js';

export function addReflection(server: Server, relativeProtoFiles: readonly string[]): void {
  const { definition } = loadProtos(relativeProtoFiles);
  new ReflectionService(definition).addToServer(server);
}
