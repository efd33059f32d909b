/**
 * gRPC server reflection (v1 and v1alpha, served by @grpc/reflection) over the same protos the
 * server loaded, so `grpcurl -cacert root.pem host:port list | describe | <call>` works without
 * local .proto files.
 *
 * The descriptors are built here from the shared protobufjs root of the proto set
 * (src/grpc/proto-load.ts), one per .proto file with its real name and its imports.
 * @grpc/proto-loader (through protobufjs) would merge every file of a package into one descriptor
 * named after the package and leave `dependency` empty, so a client that links descriptors the
 * way protoc does (grpcurl, protoreflect) cannot resolve `google.protobuf.Struct` from
 * `istio/v1/auth/ca.proto` (grpc-node issue 2595). Here every file lists the files that define
 * the types it references, and protobufjs's bundled well-known types get their canonical names
 * (`google/protobuf/struct.proto`, ...). Type names are written fully qualified and map entries
 * named as protoc names them.
 */
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import type { Server, ServiceDefinition } from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import protobuf from 'protobufjs';
import { loadProtos, protobufRoot } from './proto-load.js';
import { decodeStrict } from './strict-decode.js';

const require = createRequire(import.meta.url);

/** What protobufjs/ext/descriptor adds to the reflection classes and exports. */
interface DescriptorExt {
  readonly FileDescriptorProto: {
    create(properties: Record<string, unknown>): unknown;
    encode(message: unknown): { finish(): Uint8Array };
  };
}
type WithDescriptor = { toDescriptor(syntax: string): unknown };

/** The parts of a DescriptorProto that `qualify` rewrites (protobufjs message instances, mutable). */
interface MutableMessageDescriptor {
  name: string;
  field?: Array<{ name: string; typeName?: string; jsonName?: string }>;
  nestedType?: MutableMessageDescriptor[];
  reservedRange?: Array<{ start: number; end: number }>;
  extensionRange?: Array<{ start: number; end: number }>;
}

/** protoc's JSON name of a field: `validity_duration` -> `validityDuration`. */
function jsonName(fieldName: string): string {
  return fieldName.replace(/_([a-z0-9])/gu, (_m, c: string) => c.toUpperCase());
}

/** protoc's map entry name: `my_map` -> `MyMapEntry`. */
function mapEntryName(fieldName: string): string {
  return `${fieldName.replace(/(?:^|_)([a-z0-9])/gu, (_m, c: string) => c.toUpperCase())}Entry`;
}

/**
 * Rewrites what protobufjs's `toDescriptor` writes differently from protoc: type names relative to
 * the message (protoc writes them fully qualified, with a leading dot), map entries named after
 * the field (`Fields`; protoc: `FieldsEntry`), reserved and extension ranges with an inclusive end
 * (protoc's end is exclusive), no JSON names (protoc writes one per field), and — for protobufjs's
 * bundled well-known types, whose fields it names in lowerCamelCase — the field names of the
 * real .proto (`string_value`).
 */
function qualify(t: protobuf.Type, d: MutableMessageDescriptor, bundled: boolean): void {
  for (const r of d.reservedRange ?? []) r.end += 1;
  for (const r of d.extensionRange ?? []) r.end += 1;
  for (const f of t.fieldsArray) {
    const fd = d.field?.find((x) => x.name === f.name);
    if (!fd) continue;
    if (bundled) fd.name = f.name.replace(/[A-Z]/gu, (c) => `_${c.toLowerCase()}`);
    fd.jsonName = jsonName(fd.name);
    if (f instanceof protobuf.MapField) {
      const entry = d.nestedType?.find((n) => n.name === protobuf.util.ucFirst(f.name));
      const entryName = mapEntryName(f.name);
      if (entry) {
        entry.name = entryName;
        for (const kv of entry.field ?? []) kv.jsonName = jsonName(kv.name);
        const value = entry.field?.find((x) => x.name === 'value');
        if (value && f.resolvedType) value.typeName = f.resolvedType.fullName;
      }
      fd.typeName = `${t.fullName}.${entryName}`;
    } else if (f.resolvedType) {
      fd.typeName = f.resolvedType.fullName;
    }
  }
  for (const nested of t.nestedArray) {
    if (!(nested instanceof protobuf.Type)) continue;
    const nd = d.nestedType?.find((x) => x.name === nested.name);
    if (nd) qualify(nested, nd, bundled);
  }
}

const descriptorExt = require('protobufjs/ext/descriptor') as DescriptorExt;

/** protobufjs bundles these without a file name; their canonical files. */
const WELL_KNOWN_FILES: Readonly<Record<string, string>> = {
  '.google.protobuf.Any': 'google/protobuf/any.proto',
  '.google.protobuf.Struct': 'google/protobuf/struct.proto',
  '.google.protobuf.Value': 'google/protobuf/struct.proto',
  '.google.protobuf.ListValue': 'google/protobuf/struct.proto',
  '.google.protobuf.NullValue': 'google/protobuf/struct.proto',
  '.google.protobuf.Empty': 'google/protobuf/empty.proto',
  '.google.protobuf.Timestamp': 'google/protobuf/timestamp.proto',
  '.google.protobuf.Duration': 'google/protobuf/duration.proto',
  '.google.protobuf.FieldMask': 'google/protobuf/field_mask.proto',
};

interface FileParts {
  readonly pkg: string;
  readonly messages: protobuf.Type[];
  readonly enums: protobuf.Enum[];
  readonly services: protobuf.Service[];
  readonly dependencies: Set<string>;
}

/**
 * One encoded `google.protobuf.FileDescriptorProto` per .proto file reachable from
 * `relativeProtoFiles` (all under one `proto/` directory), imports included.
 */
export function fileDescriptorProtos(relativeProtoFiles: readonly string[]): Uint8Array[] {
  const { root, dir } = loadProtos(relativeProtoFiles);
  const fileOf = (obj: protobuf.ReflectionObject): string => {
    let top = obj;
    while (top.parent && !(top.parent instanceof protobuf.Root) && (top.parent instanceof protobuf.Type || top.parent instanceof protobuf.Service)) top = top.parent;
    if (top.filename) return relative(dir, top.filename);
    const known = WELL_KNOWN_FILES[top.fullName];
    if (!known) throw new Error(`no .proto file known for ${top.fullName}`);
    return known;
  };
  const files = new Map<string, FileParts>();
  const partsFor = (name: string, pkg: string): FileParts => {
    let p = files.get(name);
    if (!p) files.set(name, (p = { pkg, messages: [], enums: [], services: [], dependencies: new Set() }));
    return p;
  };
  const depend = (from: FileParts, fromName: string, type: protobuf.ReflectionObject | null) => {
    if (!type) return;
    const name = fileOf(type);
    if (name !== fromName) from.dependencies.add(name);
  };
  const addTypeDeps = (parts: FileParts, name: string, t: protobuf.Type) => {
    for (const f of t.fieldsArray) depend(parts, name, f.resolvedType);
    for (const nested of t.nestedArray) if (nested instanceof protobuf.Type) addTypeDeps(parts, name, nested);
  };
  const visit = (ns: protobuf.NamespaceBase) => {
    for (const obj of ns.nestedArray) {
      if (obj instanceof protobuf.Type || obj instanceof protobuf.Enum || obj instanceof protobuf.Service) {
        const name = fileOf(obj);
        const parts = partsFor(name, ns.fullName.replace(/^\./u, ''));
        if (obj instanceof protobuf.Type) {
          parts.messages.push(obj);
          addTypeDeps(parts, name, obj);
        } else if (obj instanceof protobuf.Enum) {
          parts.enums.push(obj);
        } else {
          parts.services.push(obj);
          for (const m of obj.methodsArray) {
            depend(parts, name, m.resolvedRequestType);
            depend(parts, name, m.resolvedResponseType);
          }
        }
      } else if (obj instanceof protobuf.Namespace) {
        visit(obj);
      }
    }
  };
  visit(root);
  const describe = (o: unknown) => (o as WithDescriptor).toDescriptor('proto3');
  const describeType = (t: protobuf.Type) => {
    const d = describe(t) as MutableMessageDescriptor;
    qualify(t, d, !t.filename);
    return d;
  };
  return [...files].map(([name, p]) =>
    descriptorExt.FileDescriptorProto.encode(
      descriptorExt.FileDescriptorProto.create({
        name,
        package: p.pkg,
        dependency: [...p.dependencies].sort(),
        messageType: p.messages.map(describeType),
        enumType: p.enums.map(describe),
        service: p.services.map(describe),
        syntax: 'proto3',
      }),
    ).finish(),
  );
}

/**
 * @grpc/reflection 1.0 indexes what a file without a package defines under a leading dot
 * (`.SpiffeWorkloadAPI`: the SPIFFE Workload API's proto has no package), so it would list the
 * service as `.SpiffeWorkloadAPI` and find no file for `SpiffeWorkloadAPI`, the name clients ask
 * for. Its indices of services and symbols are re-keyed by the real names (the dotted symbol keys
 * stay: the library resolves absolute references through them).
 */
function undotPackagelessNames(implementation: unknown): void {
  if (typeof implementation !== 'object' || implementation === null) return;
  for (const [key, keepDotted] of [['services', false], ['symbols', true]] as const) {
    const index: unknown = Reflect.get(implementation, key);
    if (typeof index !== 'object' || index === null) continue;
    for (const name of Object.keys(index)) {
      if (!name.startsWith('.')) continue;
      Reflect.set(index, name.slice(1), Reflect.get(index, name));
      if (!keepDotted) Reflect.deleteProperty(index, name);
    }
  }
}

/**
 * @grpc/reflection's own .proto files (v1 and v1alpha), through the one loader of proto sets (loaded
 * once), with proto-loader's lowerCamelCase field names: its handlers read `messageRequest`,
 * `fileContainingSymbol`, and echo the request back as `originalRequest`.
 */
function reflectionProtos(): protobuf.Root {
  const dir = join(dirname(require.resolve('@grpc/reflection')), '../proto/grpc/reflection');
  return protobufRoot(['v1/reflection.proto', 'v1alpha/reflection.proto'], { dir, keepCase: false });
}

/** @grpc/reflection's proto-loader options (its PROTO_LOADER_OPTS, not exported), so a request object is the one its handlers expect. */
const REFLECTION_OBJECT_OPTIONS: protobuf.IConversionOptions = Object.freeze({ longs: String, enums: String, bytes: Array, defaults: true, oneofs: true });

/**
 * @grpc/reflection decodes requests with @grpc/proto-loader, i.e. protobufjs's `decode` of a
 * Buffer, which hands out a shortened string where a field runs past the end of the message (and
 * misreads the rest src/grpc/strict-decode.ts lists). Each request is instead decoded once,
 * strictly, with the same message type and made into the object proto-loader would build
 * (`toObject` with the library's options; test/grpc/strict-decode holds the two to the same
 * objects); bytes that do not decode make the deserializer throw, which grpc-js answers INTERNAL
 * (as grpc-go does for a request it cannot unmarshal).
 */
function strictRequests(definition: ServiceDefinition): ServiceDefinition {
  const root = reflectionProtos();
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(definition)) {
    const service = method.path.split('/')[1] ?? '';
    const type = root.lookupService(service).methods[name]?.resolvedRequestType;
    if (!type) throw new Error(`reflection method ${method.path}: no request type in @grpc/reflection's protos`);
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer): unknown => type.toObject(decodeStrict(type, bytes), REFLECTION_OBJECT_OPTIONS),
    };
  }
  return out as ServiceDefinition;
}

export function addReflection(server: Server, relativeProtoFiles: readonly string[]): void {
  // @grpc/reflection reads only `fileDescriptorProtos` from the definition's entries: one entry
  // (a type definition in proto-loader's shape) carries every file.
  const descriptors = fileDescriptorProtos(relativeProtoFiles).map((d) => Buffer.from(d.buffer, d.byteOffset, d.byteLength));
  const definition: ConstructorParameters<typeof ReflectionService>[0] = {
    files: { format: 'Protocol Buffer 3 EnumDescriptorProto', type: {}, fileDescriptorProtos: descriptors },
  };
  const reflection = new ReflectionService(definition);
  for (const implementation of Object.values(reflection)) undotPackagelessNames(implementation);
  // The library only calls addService on the server it is given.
  const strictServer: Pick<Server, 'addService'> = {
    addService: (service, implementation) => server.addService(strictRequests(service), implementation),
  };
  reflection.addToServer(strictServer as Server);
}
