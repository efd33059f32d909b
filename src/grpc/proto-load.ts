/**
 * Loads certbroker's .proto files at run time with @grpc/proto-loader (no generated code: the
 * protos are small, the loader keeps the build a plain `tsc`, and the same files feed
 * reflection and the Python interop stubs).
 *
 * The `proto/` directory is found by walking up from this module, so the same code works from
 * `src/` (ts-node style), from `dist/src/` when the build copied `proto/` to `dist/proto/`, and
 * from `dist/src/` when it did not (plain `npx tsc -p .`).
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';
import { loadPackageDefinition, type GrpcObject } from '@grpc/grpc-js';
import protobuf from 'protobufjs';

/** Options shared by every certbroker server and client so field names match the .proto. */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = Object.freeze({
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** The first `proto/` directory above this module that holds `relativeFile`. */
export function protoRootFor(relativeFile: string, from: string = dirname(fileURLToPath(import.meta.url))): string {
  let dir = resolve(from);
  for (;;) {
    const candidate = join(dir, 'proto');
    if (existsSync(join(candidate, relativeFile))) return candidate;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`proto file ${relativeFile} not found in any proto/ directory above ${from}`);
    dir = parent;
  }
}

export interface LoadedProto {
  readonly definition: protoLoader.PackageDefinition;
  readonly grpcObject: GrpcObject;
  readonly root: string;
}

const cache = new Map<string, LoadedProto>();

/** Loads (once per process) the given files, all relative to the same `proto/` root. */
export function loadProtos(relativeFiles: readonly string[]): LoadedProto {
  const key = relativeFiles.join('\0');
  const hit = cache.get(key);
  if (hit) return hit;
  const first = relativeFiles[0];
  if (first === undefined) throw new Error('loadProtos needs at least one file');
  const root = protoRootFor(first);
  const definition = protoLoader.loadSync(
    relativeFiles.map((f) => join(root, f)),
    { ...PROTO_LOADER_OPTIONS, includeDirs: [root] },
  );
  const loaded: LoadedProto = { definition, grpcObject: loadPackageDefinition(definition), root };
  cache.set(key, loaded);
  return loaded;
}

/**
 * A protobufjs Root with `relativeFiles` (all under the same `proto/` directory) loaded, for code
 * that encodes and decodes gRPC messages itself instead of through grpc-js. Imports of
 * `google/protobuf/*` resolve to protobufjs's bundled well-known types. `keepCase` keeps the
 * .proto field names (as grpc-js does with PROTO_LOADER_OPTIONS); without it fields are camelCase.
 */
export function protobufRoot(relativeFiles: readonly string[], options: { readonly keepCase?: boolean } = {}): protobuf.Root {
  const first = relativeFiles[0];
  if (first === undefined) throw new Error('protobufRoot needs at least one file');
  const dir = protoRootFor(first);
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') ? target : join(dir, target));
  root.loadSync([...relativeFiles], { keepCase: options.keepCase ?? false });
  return root;
}

/** Looks up a dotted name (`istio.v1.auth.IstioCertificateService`) in a loaded GrpcObject. */
export function lookup<T>(obj: GrpcObject, dotted: string): T {
  let cur: unknown = obj;
  for (const part of dotted.split('.')) {
    if (cur === null || typeof cur !== 'object' && typeof cur !== 'function') {
      throw new Error(`${dotted} not found in the loaded protos`);
    }
    cur = (cur as Record<string, unknown>)[part];
  }
  if (cur === undefined) throw new Error(`${dotted} not found in the loaded protos`);
  return cur as T;
}
