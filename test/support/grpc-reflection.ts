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
import type { ChannelCredentials, ChannelOptions, Client, ClientDuplexStream } from '@grpc/grpc-js';
import { loadProtos, lookup } from '../../src/grpc/proto-load.js';

const require = createRequire(import.meta.url);

export type ReflectionClient = Client & { ServerReflectionInfo(): ClientDuplexStream<ReflectionRequest, ReflectionResponse> };

export type ReflectionRequest = { list_services: string } | { file_containing_symbol: string };

export interface ReflectionResponse {
  readonly list_services_response?: { readonly service: ReadonlyArray<{ readonly name: string }> };
  readonly file_descriptor_response?: { readonly file_descriptor_proto: readonly Buffer[] };
  readonly error_response?: { readonly error_code: number; readonly error_message: string };
}

/** A google.protobuf.DescriptorProto, the parts the tests look at. */
export interface MessageDescriptor {
  readonly name: string;
  readonly field?: ReadonlyArray<{ readonly name: string; readonly typeName?: string }>;
  readonly nestedType?: readonly MessageDescriptor[];
  readonly enumType?: ReadonlyArray<{ readonly name: string }>;
}

/** The parts of a google.protobuf.FileDescriptorProto the tests look at. */
export interface FileDescriptor {
  readonly name: string;
  readonly package?: string;
  readonly dependency?: readonly string[];
  readonly messageType?: readonly MessageDescriptor[];
  readonly enumType?: ReadonlyArray<{ readonly name: string }>;
  readonly service?: ReadonlyArray<{
    readonly name: string;
    readonly method?: ReadonlyArray<{ readonly name: string; readonly inputType?: string; readonly outputType?: string; readonly serverStreaming?: boolean }>;
  }>;
}

/**
 * What stops `files` from linking the way protoc, grpcurl and protoreflect link descriptors:
 * every type a field or method names must be defined in its own file or in a file that file
 * imports (`dependency`), and every import must be among `files`. Empty when they link.
 */
export function linkProblems(files: readonly FileDescriptor[]): string[] {
  const definedIn = new Map<string, string>();
  const define = (file: string, scope: string, m: MessageDescriptor) => {
    const fqn = `${scope}.${m.name}`;
    definedIn.set(fqn, file);
    for (const e of m.enumType ?? []) definedIn.set(`${fqn}.${e.name}`, file);
    for (const n of m.nestedType ?? []) define(file, fqn, n);
  };
  for (const f of files) {
    const scope = f.package ? `.${f.package}` : '';
    for (const m of f.messageType ?? []) define(f.name, scope, m);
    for (const e of f.enumType ?? []) definedIn.set(`${scope}.${e.name}`, f.name);
  }
  const names = new Set(files.map((f) => f.name));
  const problems: string[] = [];
  for (const f of files) {
    const visible = new Set([f.name, ...(f.dependency ?? [])]);
    for (const d of f.dependency ?? []) if (!names.has(d)) problems.push(`${f.name} imports ${d}, which was not sent`);
    const check = (where: string, typeName: string | undefined) => {
      if (!typeName) return;
      const home = definedIn.get(typeName);
      if (home === undefined) problems.push(`${where}: ${typeName} is defined nowhere`);
      else if (!visible.has(home)) problems.push(`${where}: ${typeName} is in ${home}, which ${f.name} does not import`);
    };
    const walk = (m: MessageDescriptor, path: string) => {
      for (const fld of m.field ?? []) check(`${path}.${fld.name}`, fld.typeName);
      for (const n of m.nestedType ?? []) walk(n, `${path}.${n.name}`);
    };
    for (const m of f.messageType ?? []) walk(m, `${f.name}:${m.name}`);
    for (const svc of f.service ?? []) {
      for (const m of svc.method ?? []) {
        check(`${f.name}:${svc.name}.${m.name} input`, m.inputType);
        check(`${f.name}:${svc.name}.${m.name} output`, m.outputType);
      }
    }
  }
  return problems;
}

/** grpc.reflection.v1.ServerReflection, loaded from the @grpc/reflection package. */
/** The reflection service's client class (built from its .proto; `lookup` names what it is). */
export type ReflectionClientConstructor = new (address: string, credentials: ChannelCredentials, options?: ChannelOptions) => ReflectionClient;

export function reflectionClientConstructor(): ReflectionClientConstructor {
  const dir = join(dirname(require.resolve('@grpc/reflection/package.json')), 'build', 'proto', 'grpc', 'reflection', 'v1');
  return lookup<ReflectionClientConstructor>(loadProtos(['reflection.proto'], { dir }).grpcObject, 'grpc.reflection.v1.ServerReflection');
}

/** A reflection client for `target` (for servers reached by address rather than through BrokerClient). */
export function reflectionClient(target: string, creds: ChannelCredentials, options: ChannelOptions = {}): ReflectionClient {
  return new (reflectionClientConstructor())(target, creds, options);
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
