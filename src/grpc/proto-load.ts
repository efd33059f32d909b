/**
 * certbroker's .proto files, loaded at run time with protobufjs (no generated code: the protos
 * are small, the build stays a plain `tsc`, and the same files feed reflection and the Python
 * interop stubs).
 *
 * One protobufjs `Root` per proto set (the files a part loads together), parsed once per process
 * and shared by everything that speaks those messages: the grpc-js service definitions built
 * from it (src/grpc/service-definitions.ts), the CA's lean http2 transport, reflection, the
 * rpc-status details and the Broker API's `Any` payloads. Field names are those of the .proto
 * (`validity_duration`, `cert_chain`); protobufjs's bundled well-known types keep their
 * lowerCamelCase names (`stringValue`). The shared roots must not be modified.
 *
 * The `proto/` directory is found by walking up from this module, so the same code works from
 * `src/` (ts-node style), from `dist/src/` when the build copied `proto/` to `dist/proto/`, and
 * from `dist/src/` when it did not (plain `npx tsc -p .`).
 */
import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadPackageDefinition, type GrpcObject } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { servicesPackageDefinition } from './service-definitions.js';

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
  /** The protobufjs root with the files loaded and resolved. Shared: look types up, never modify it. */
  readonly root: protobuf.Root;
  /** grpc-js service constructors (with `.service` definitions) built from `root`, by dotted name. */
  readonly grpcObject: GrpcObject;
  /** The directory the files are relative to. */
  readonly dir: string;
}

export interface LoadProtosOptions {
  /** Where the files are (default: the `proto/` directory above this module holding the first file). */
  readonly dir?: string;
  /**
   * Field names as written in the .proto (default, true), or lowerCamelCase as @grpc/proto-loader
   * names them by default (false: for @grpc/reflection's handlers, which take proto-loader's
   * objects). A separate root either way.
   */
  readonly keepCase?: boolean;
}

const cache = new Map<string, LoadedProto>();

/**
 * Loads (once per process) the given files, all relative to the same directory: one protobufjs
 * root and the grpc-js objects built from it. Imports of `google/protobuf/*` resolve to
 * protobufjs's bundled well-known types.
 */
export function loadProtos(relativeFiles: readonly string[], options: LoadProtosOptions = {}): LoadedProto {
  const first = relativeFiles[0];
  if (first === undefined) throw new Error('loadProtos needs at least one file');
  const dir = options.dir ?? protoRootFor(first);
  const files = [...new Set(relativeFiles)].sort();
  const keepCase = options.keepCase ?? true;
  const key = `${dir}\0${keepCase ? '' : 'camelCase\0'}${files.join('\0')}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') || isAbsolute(target) ? target : join(dir, target));
  root.loadSync(files, { keepCase });
  root.resolveAll();
  const loaded: LoadedProto = { root, grpcObject: loadPackageDefinition(servicesPackageDefinition(root)), dir };
  cache.set(key, loaded);
  return loaded;
}

/** The shared protobufjs root of a proto set (see `loadProtos`), for code that encodes and decodes messages itself. */
export function protobufRoot(relativeFiles: readonly string[], options: LoadProtosOptions = {}): protobuf.Root {
  return loadProtos(relativeFiles, options).root;
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
