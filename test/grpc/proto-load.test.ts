/**
 * One protobufjs root per proto set (src/grpc/proto-load.ts): every caller of a set gets the same
 * Root, the grpc-js service definitions encode and decode with that Root's types, and those
 * definitions behave exactly like @grpc/proto-loader's (the loader grpc-js users know, with the
 * options certbroker used before: keepCase, longs Number, enums String, defaults, oneofs) — same
 * paths, streaming flags and lowerCamelCase aliases, byte-identical encoding and identical
 * decoded objects for a message of every request and response type, every field filled.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { loadSync, type PackageDefinition as LoaderDefinition } from '@grpc/proto-loader';
import type { MethodDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { loadProtos, lookup, protobufRoot } from '../../src/grpc/proto-load.js';
import { camelCaseName, servicesPackageDefinition } from '../../src/grpc/service-definitions.js';
import { brokerMessageType } from '../../src/broker/index.js';
import { KUBERNETES_REFERENCE_TYPE } from '../../src/protocol/spiffe-broker.js';
import { healthServiceDefinition } from '../../src/grpc/health.js';

const require = createRequire(import.meta.url);
const REFLECTION_DIR = join(dirname(require.resolve('@grpc/reflection/package.json')), 'build', 'proto', 'grpc', 'reflection', 'v1');

const SETS: ReadonlyArray<{ readonly files: readonly string[]; readonly dir?: string }> = [
  { files: ['istio/v1/auth/ca.proto'] },
  { files: ['grpc/health/v1/health.proto'] },
  { files: ['spiffe/broker/broker.proto'] },
  { files: ['google/rpc/status.proto', 'google/rpc/error_details.proto'] },
  { files: ['istio/v1/auth/ca.proto', 'grpc/health/v1/health.proto'] },
  { files: ['reflection.proto'], dir: REFLECTION_DIR },
];

test('one root per proto set: every caller gets the same Root, whatever the file order', () => {
  const ca = protobufRoot(['istio/v1/auth/ca.proto', 'grpc/health/v1/health.proto']);
  assert.equal(protobufRoot(['grpc/health/v1/health.proto', 'istio/v1/auth/ca.proto']), ca);
  assert.equal(loadProtos(['istio/v1/auth/ca.proto', 'grpc/health/v1/health.proto']).root, ca);
  assert.equal(brokerMessageType(KUBERNETES_REFERENCE_TYPE), protobufRoot(['spiffe/broker/broker.proto']).lookupType(KUBERNETES_REFERENCE_TYPE));
  assert.notEqual(protobufRoot(['istio/v1/auth/ca.proto']), ca, 'another set, another root');
});

test("grpc-js's definitions encode and decode with the shared root's types", (t) => {
  const Request = protobufRoot(['grpc/health/v1/health.proto']).lookupType('grpc.health.v1.HealthCheckRequest');
  const seen: unknown[] = [];
  const fromObject = Request.fromObject.bind(Request);
  t.mock.method(Request, 'fromObject', (o: Record<string, unknown>) => {
    seen.push(o);
    return fromObject(o);
  });
  const check = healthServiceDefinition().Check!;
  const bytes = check.requestSerialize({ service: 'spiffe.broker.API' });
  assert.deepEqual(seen, [{ service: 'spiffe.broker.API' }]);
  assert.deepEqual(check.requestDeserialize(bytes), { service: 'spiffe.broker.API' });
});

/** A value for every field of `type` (nested messages to `depth`), so encoding covers each field. */
function filled(type: protobuf.Type, depth = 3): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of type.fieldsArray) {
    f.resolve();
    const one = (): unknown => {
      if (f.resolvedType instanceof protobuf.Enum) return Object.keys(f.resolvedType.values).at(-1);
      if (f.resolvedType instanceof protobuf.Type) return depth > 0 ? filled(f.resolvedType, depth - 1) : {};
      switch (f.type) {
        case 'string': return `${f.name}-é`;
        case 'bytes': return Buffer.from(f.name);
        case 'bool': return true;
        case 'double': case 'float': return 1.5;
        default: return 7;
      }
    };
    if (f.partOf && f.partOf.oneof[0] !== f.name) continue; // one member per oneof
    if (f instanceof protobuf.MapField) out[f.name] = { k1: one(), k2: one() };
    else out[f.name] = f.repeated ? [one(), one()] : one();
  }
  return out;
}

function methodsOf(definition: LoaderDefinition | ReturnType<typeof servicesPackageDefinition>): Map<string, MethodDefinition<unknown, unknown>> {
  const methods = new Map<string, MethodDefinition<unknown, unknown>>();
  for (const [name, entry] of Object.entries(definition)) {
    if ('format' in entry) continue; // proto-loader's message type entries
    for (const [method, def] of Object.entries(entry as Record<string, MethodDefinition<unknown, unknown>>)) methods.set(`${name}/${method}`, def);
  }
  return methods;
}

test("the service definitions behave as @grpc/proto-loader's, for every method of every proto set", () => {
  for (const set of SETS) {
    const { root, dir } = loadProtos(set.files, set.dir ? { dir: set.dir } : {});
    const reference = methodsOf(
      loadSync(set.files.map((f) => join(dir, f)), { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true, includeDirs: [dir] }),
    );
    const ours = methodsOf(servicesPackageDefinition(root));
    assert.deepEqual([...ours.keys()].sort(), [...reference.keys()].sort(), set.files.join(','));
    for (const [name, ref] of reference) {
      const def = ours.get(name)!;
      for (const k of ['path', 'requestStream', 'responseStream', 'originalName'] as const) assert.equal(def[k], ref[k], `${name} ${k}`);
      const method = root.lookup(name.replace('/', '.')) as protobuf.Method;
      for (const [kind, type] of [['request', method.resolvedRequestType!], ['response', method.resolvedResponseType!]] as const) {
        const value = filled(type);
        const serialize = kind === 'request' ? 'requestSerialize' : 'responseSerialize';
        const deserialize = kind === 'request' ? 'requestDeserialize' : 'responseDeserialize';
        const bytes = def[serialize](value);
        assert.deepEqual(bytes, ref[serialize](value), `${name} ${kind} bytes`);
        if (type.fieldsArray.length > 0) assert.ok(bytes.length > 0, `${name} ${kind}: the filled message encodes to something`);
        assert.deepEqual(def[deserialize](bytes), ref[deserialize](bytes), `${name} ${kind} decoded`);
        assert.deepEqual(def[deserialize](Buffer.alloc(0)), ref[deserialize](Buffer.alloc(0)), `${name} ${kind} defaults`);
      }
    }
  }
});

test('grpc-js client constructors carry the definitions (lookup by dotted name)', () => {
  const Ctor = lookup<{ service: Record<string, MethodDefinition<unknown, unknown>> }>(loadProtos(['spiffe/broker/broker.proto']).grpcObject, 'spiffe.broker.API');
  assert.deepEqual(Object.keys(Ctor.service), ['SubscribeToX509SVID', 'SubscribeToX509Bundles', 'FetchJWTSVID', 'SubscribeToJWTBundles']);
  assert.equal(Ctor.service.SubscribeToX509SVID?.path, '/spiffe.broker.API/SubscribeToX509SVID');
});

test("camelCaseName is lodash's camelCase for rpc names", () => {
  const cases: Record<string, string> = {
    CreateCertificate: 'createCertificate',
    Check: 'check',
    SubscribeToX509SVID: 'subscribeToX509Svid',
    FetchJWTSVID: 'fetchJwtsvid',
    ServerReflectionInfo: 'serverReflectionInfo',
    GetHTTPResponse: 'getHttpResponse',
    snake_case_name: 'snakeCaseName',
    V2Thing: 'v2Thing',
  };
  for (const [name, expected] of Object.entries(cases)) assert.equal(camelCaseName(name), expected, name);
});
