/**
 * grpc-js service definitions built from a loaded protobufjs root, so grpc-js encodes and decodes
 * with the same types as everything else that speaks the proto set (src/grpc/proto-load.ts). The
 * shape is the one @grpc/proto-loader produces: method path `/<package.Service>/<Method>`,
 * streaming flags, `originalName` (the lowerCamelCase alias grpc-js also accepts), serializers
 * `encode(fromObject(value))` and deserializers `toObject(decodeStrict(bytes), MESSAGE_OBJECT_OPTIONS)`.
 * The deserializers (requests on servers, responses on clients) refuse a message any field of
 * which runs past its end or the end of its enclosing message (src/grpc/strict-decode.ts), where
 * protobufjs's own `decode` of a Buffer would hand out a shortened string.
 */
import type { loadPackageDefinition, MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { decodeStrict } from './strict-decode.js';

/** What grpc-js's `loadPackageDefinition` takes (the type is not exported by name). */
export type PackageDefinition = Parameters<typeof loadPackageDefinition>[0];

/**
 * How decoded messages look to grpc-js handlers and clients: int64 as Number, enums by name,
 * unset fields with their defaults, and the name of the set field of each oneof (`kind` of a
 * `google.protobuf.Value`).
 */
export const MESSAGE_OBJECT_OPTIONS: protobuf.IConversionOptions = Object.freeze({
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** lodash's camelCase of an rpc name, as proto-loader writes `originalName` (`SubscribeToX509SVID` -> `subscribeToX509Svid`). */
export function camelCaseName(name: string): string {
  const words = name.match(/[A-Z]{2,}(?=[A-Z][a-z]+[0-9]*|[^A-Za-z0-9]|$)|[A-Z]?[a-z]+[0-9]*|[A-Z]+|[0-9]+/gu) ?? [];
  return words
    .map((w, i) => (i === 0 ? w.toLowerCase() : w.charAt(0).toUpperCase() + w.slice(1).toLowerCase()))
    .join('');
}

function serializer(type: protobuf.Type): (value: unknown) => Buffer {
  return (value) => {
    if (Array.isArray(value)) throw new Error(`cannot serialize an array as ${type.fullName.slice(1)}`);
    const bytes = type.encode(type.fromObject(value as Record<string, unknown>)).finish();
    // protobufjs's writer hands out a Buffer under Node: no copy on the way out.
    return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializer(type: protobuf.Type): (bytes: Buffer) => unknown {
  return (bytes) => type.toObject(decodeStrict(type, bytes), MESSAGE_OBJECT_OPTIONS);
}

function methodDefinition(service: protobuf.Service, method: protobuf.Method): MethodDefinition<unknown, unknown> {
  const request = method.resolvedRequestType;
  const response = method.resolvedResponseType;
  if (!request || !response) throw new Error(`${method.fullName}: request or response type not resolved`);
  return {
    path: `/${service.fullName.slice(1)}/${method.name}`,
    requestStream: method.requestStream === true,
    responseStream: method.responseStream === true,
    requestSerialize: serializer(request),
    requestDeserialize: deserializer(request),
    responseSerialize: serializer(response),
    responseDeserialize: deserializer(response),
    originalName: camelCaseName(method.name),
  };
}

function services(ns: protobuf.NamespaceBase): protobuf.Service[] {
  return ns.nestedArray.flatMap((obj) =>
    obj instanceof protobuf.Service ? [obj] : obj instanceof protobuf.Namespace && !(obj instanceof protobuf.Type) ? services(obj) : [],
  );
}

/** Every service of a resolved root, by dotted name, ready for grpc-js's `loadPackageDefinition`. */
export function servicesPackageDefinition(root: protobuf.Root): PackageDefinition {
  const definition: PackageDefinition = {};
  for (const service of services(root)) {
    const methods: Record<string, MethodDefinition<unknown, unknown>> = {};
    for (const method of service.methodsArray) methods[method.name] = methodDefinition(service, method);
    definition[service.fullName.slice(1)] = methods satisfies ServiceDefinition;
  }
  return definition;
}
