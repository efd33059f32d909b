/**
 * The descriptors our reflection serves, against protoc's own (grpc_tools.protoc from Debian's
 * python3-grpc-tools, `--include_imports`): same files, names, imports, messages, fields (numbers,
 * types, labels, fully-qualified type names, JSON names), map entries, enums, reserved ranges,
 * services and methods. File-level options (java_package …), empty option messages and source
 * info are left out of the comparison: they do not affect linking or the wire. And every set links (linkProblems).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileDescriptorProtos } from '../../src/grpc/reflection.js';
import { protoRootFor } from '../../src/grpc/proto-load.js';
import { linkProblems, type FileDescriptor } from '../support/grpc-reflection.js';
import { TEST_PYTHON, grpcToolsProtoInclude, pythonGrpcMissing } from '../support/tools.js';
import { removeTempDirSync, tempDirSync } from '../support/scratch.js';

const require = createRequire(import.meta.url);
const { FileDescriptorProto, FileDescriptorSet } = require('protobufjs/ext/descriptor') as {
  FileDescriptorProto: { decode(b: Uint8Array): unknown; toObject(m: unknown): unknown };
  FileDescriptorSet: { decode(b: Uint8Array): unknown; toObject(m: unknown): { file: unknown[] } };
};

const SETS = [
  ['istio/v1/auth/ca.proto', 'grpc/health/v1/health.proto'],
  ['spiffe/broker/broker.proto', 'grpc/health/v1/health.proto'],
];

function protocDescriptors(files: readonly string[]): Record<string, unknown>[] {
  const dir = tempDirSync('protoc-');
  try {
    const out = join(dir, 'set.pb');
    execFileSync(TEST_PYTHON, ['-m', 'grpc_tools.protoc', '-I', protoRootFor(files[0]!), '-I', grpcToolsProtoInclude(), '--include_imports', `--descriptor_set_out=${out}`, ...files]);
    return FileDescriptorSet.toObject(FileDescriptorSet.decode(readFileSync(out))).file as Record<string, unknown>[];
  } finally {
    removeTempDirSync(dir);
  }
}

function ours(files: readonly string[]): Record<string, unknown>[] {
  return fileDescriptorProtos(files).map((b) => FileDescriptorProto.toObject(FileDescriptorProto.decode(b)) as Record<string, unknown>);
}

/** Drops empty option messages (protoc writes `options: {}` for an `rpc … {}` body). */
function withoutEmptyOptions(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutEmptyOptions);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (k === 'options' && x !== null && typeof x === 'object' && Object.keys(x).length === 0) continue;
    out[k] = withoutEmptyOptions(x);
  }
  return out;
}

/** What linking and the wire depend on: file options and source info dropped, files by name. */
function comparable(files: Record<string, unknown>[]): Record<string, unknown> {
  const byName: Record<string, unknown> = {};
  for (const f of files) {
    const { options: _options, sourceCodeInfo: _info, ...rest } = f;
    byName[String(f.name)] = withoutEmptyOptions(rest);
  }
  return byName;
}

const skip = pythonGrpcMissing();

for (const files of SETS) {
  test(`reflection descriptors for ${files.join(' + ')} match protoc's`, { skip }, () => {
    assert.deepEqual(comparable(ours(files)), comparable(protocDescriptors(files)));
  });
}

test('every served descriptor set links (each referenced type in its own file or an import)', () => {
  for (const files of SETS) assert.deepEqual(linkProblems(ours(files) as unknown as FileDescriptor[]), [], files.join(' + '));
});
