/**
 * A gRPC server reflection (v1) client for tests: the service constructor from the .proto that
 * @grpc/reflection ships, one request/one answer on the bidirectional stream, and the file
 * descriptors of an answer decoded with protobufjs's descriptor types.
 *
 *   const r = reflectionClient(target, creds);   // or BrokerClient.serviceClient(reflectionClientConstructor())
 *   const names = await listServices(r);
 *   const files = await fileContainingSymbol(r, 'spiffe.broker.API');
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { loadPackageDefinition, type ChannelCredentials, type ChannelOptions, type Client, type ClientDuplexStream, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { lookup } from '../../src/grpc/proto-load.js';

const require = createRequire(import.meta.url);

export type ReflectionClient = Client & { ServerReflectionInfo(): ClientDuplexStream<ReflectionRequest, ReflectionResponse> };

export type ReflectionRequest = { list_services: string } | { file_containing_symbol: string };

export interface ReflectionResponse {
  readonly list_services_response?: { readonly service: ReadonlyArray<{ readonly name: string }> };
  readonly file_descriptor_response?: { readonly file_descriptor_proto: readonly Buffer[] };
  readonly error_response?: { readonly error_code: number; readonly error_message: string };
}

/** The parts of a google.protobuf.FileDescriptorProto the tests look at. */
export interface FileDescriptor {
  readonly name: string;
  readonly package?: string;
  readonly messageType?: ReadonlyArray<{ readonly name: string }>;
  readonly service?: ReadonlyArray<{
    readonly name: string;
    readonly method?: ReadonlyArray<{ readonly name: string; readonly inputType?: string; readonly outputType?: string; readonly serverStreaming?: boolean }>;
  }>;
}

/** grpc.reflection.v1.ServerReflection, loaded from the @grpc/reflection package. */
export function reflectionClientConstructor(): ServiceClientConstructor {
  const dir = join(dirname(require.resolve('@grpc/reflection/package.json')), 'build', 'proto', 'grpc', 'reflection', 'v1');
  const pkg = loadPackageDefinition(loadSync('reflection.proto', { includeDirs: [dir], keepCase: true, defaults: true, oneofs: true }));
  return lookup<ServiceClientConstructor>(pkg, 'grpc.reflection.v1.ServerReflection');
}

/** A reflection client for `target` (for servers reached by address rather than through BrokerClient). */
export function reflectionClient(target: string, creds: ChannelCredentials, options: ChannelOptions = {}): ReflectionClient {
  return new (reflectionClientConstructor())(target, creds, options) as unknown as ReflectionClient;
}

/** Sends one request on a fresh reflection stream and resolves with the first answer. */
export function reflect(client: ReflectionClient, request: ReflectionRequest): Promise<ReflectionResponse> {
  const stream = client.ServerReflectionInfo();
  return new Promise<ReflectionResponse>((resolve, reject) => {
    stream.once('data', (msg: ReflectionResponse) => {
      stream.end();
      resolve(msg);
    });
    stream.once('error', reject);
    stream.write(request);
  });
}

export async function listServices(client: ReflectionClient): Promise<string[]> {
  const res = await reflect(client, { list_services: '' });
  if (!res.list_services_response) throw new Error(`reflection answered ${JSON.stringify(res)} to list_services`);
  return res.list_services_response.service.map((s) => s.name);
}

/** The file defining `symbol` and the files it depends on, decoded. */
export async function fileContainingSymbol(client: ReflectionClient, symbol: string): Promise<FileDescriptor[]> {
  const res = await reflect(client, { file_containing_symbol: symbol });
  if (!res.file_descriptor_response) throw new Error(`reflection answered ${JSON.stringify(res)} for ${symbol}`);
  const { FileDescriptorProto } = require('protobufjs/ext/descriptor') as {
    FileDescriptorProto: { decode(b: Uint8Array): unknown; toObject(m: unknown): unknown };
  };
  return res.file_descriptor_response.file_descriptor_proto.map((b) => FileDescriptorProto.toObject(FileDescriptorProto.decode(b)) as FileDescriptor);
}
