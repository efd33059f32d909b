/**
 * The constants of src/protocol name what the .proto files define (so a renamed service or method
 * cannot drift from its constant), and proto/spiffe/workload/workload.proto is wire-compatible
 * with the SPIFFE Workload API standard (workloadapi.proto): names, field numbers, types, streaming.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import protobuf from 'protobufjs';
import { protoRootFor, protobufRoot } from '../../src/grpc/proto-load.js';
import { serviceDefinitionOf } from '../../src/grpc/typed-methods.js';
import * as grpcHealth from '../../src/protocol/grpc-health.js';
import * as grpcStatus from '../../src/protocol/grpc-status.js';
import * as istioCa from '../../src/protocol/istio-ca.js';
import * as spiffeBroker from '../../src/protocol/spiffe-broker.js';
import * as workloadApi from '../../src/protocol/workload-api.js';
import { grpcToolsProtoInclude, pythonGrpcMissing, TEST_PYTHON } from '../support/tools.js';
import { tempDirSync } from '../support/scratch.js';

function methodPaths(protoFile: string, service: string): Record<string, { path: string; requestStream: boolean; responseStream: boolean }> {
  const def = serviceDefinitionOf([protoFile], service);
  return Object.fromEntries(Object.entries(def).map(([name, m]) => [name, { path: m.path, requestStream: m.requestStream, responseStream: m.responseStream }]));
}

test('Istio CA constants name the service, method and messages of istio/v1/auth/ca.proto', () => {
  const root = protobufRoot([istioCa.CA_PROTO]);
  assert.deepEqual(methodPaths(istioCa.CA_PROTO, istioCa.CA_SERVICE), {
    [istioCa.CREATE_CERTIFICATE_METHOD]: { path: istioCa.CREATE_CERTIFICATE_PATH, requestStream: false, responseStream: false },
  });
  assert.equal(istioCa.CREATE_CERTIFICATE_PATH, '/istio.v1.auth.IstioCertificateService/CreateCertificate');
  const req = root.lookupType(istioCa.CERTIFICATE_REQUEST_TYPE);
  assert.deepEqual(Object.keys(req.fields).sort(), ['csr', 'metadata', 'validity_duration']);
  assert.deepEqual(Object.keys(root.lookupType(istioCa.CERTIFICATE_RESPONSE_TYPE).fields), ['cert_chain']);
});

test('health constants name grpc.health.v1.Health and its serving-status numbers', () => {
  const root = protobufRoot([grpcHealth.HEALTH_PROTO]);
  assert.equal(methodPaths(grpcHealth.HEALTH_PROTO, grpcHealth.HEALTH_SERVICE)[grpcHealth.HEALTH_CHECK_METHOD]?.path, grpcHealth.HEALTH_CHECK_PATH);
  root.lookupType(grpcHealth.HEALTH_CHECK_REQUEST_TYPE);
  const status = root.lookupEnum(`${grpcHealth.HEALTH_CHECK_RESPONSE_TYPE}.ServingStatus`);
  assert.deepEqual({ ...status.values }, { ...grpcHealth.SERVING_STATUS_NUMBER });
});

test('error-detail constants name google.rpc.Status and ErrorInfo', () => {
  const root = protobufRoot(grpcStatus.RPC_STATUS_PROTOS);
  root.lookupType(grpcStatus.RPC_STATUS_TYPE);
  assert.equal(grpcStatus.ERROR_INFO_TYPE_URL, `type.googleapis.com/${root.lookupType(grpcStatus.ERROR_INFO_TYPE).fullName.slice(1)}`);
});

test('Broker API constants name every method of spiffe.broker.API and its reference types', () => {
  const paths = methodPaths(spiffeBroker.BROKER_PROTO, spiffeBroker.BROKER_SERVICE);
  assert.deepEqual(Object.keys(paths).sort(), Object.values(spiffeBroker.BROKER_METHOD).sort());
  for (const name of Object.values(spiffeBroker.BROKER_METHOD)) assert.equal(paths[name]!.path, `/spiffe.broker.API/${name}`);
  const root = protobufRoot([spiffeBroker.BROKER_PROTO]);
  const ref = root.lookupType(spiffeBroker.KUBERNETES_REFERENCE_TYPE);
  assert.deepEqual(
    Object.values(ref.fields).map((f) => [f.name, f.id]),
    [['type', 1], ['key', 2], ['uid', 3]],
  );
  root.lookupType(spiffeBroker.PID_REFERENCE_TYPE);
  assert.deepEqual(spiffeBroker.KUBERNETES_REFERENCE_TYPE_URLS, [
    'type.googleapis.com/spiffe.broker.KubernetesObjectReference',
    'type.googleapis.com/spiffe.reference.KubernetesObjectReference',
  ]);
  assert.deepEqual(spiffeBroker.PID_REFERENCE_TYPE_URLS, ['type.googleapis.com/spiffe.broker.WorkloadPIDReference', 'type.googleapis.com/spiffe.reference.WorkloadPIDReference']);
});

test('each accepted reference type URL names a message of its proto with the standard fields and numbers (spiffe.broker and spiffe.reference alike)', () => {
  const expected: Record<string, Array<[string, number]>> = {
    KubernetesObjectReference: [['type', 1], ['key', 2], ['uid', 3]],
    WorkloadPIDReference: [['pid', 1]],
  };
  for (const [url, info] of Object.entries(spiffeBroker.REFERENCE_TYPES)) {
    const type = protobufRoot([info.proto]).lookupType(info.type);
    assert.equal(url, `type.googleapis.com/${type.fullName.slice(1)}`);
    assert.deepEqual(Object.values(type.fields).map((f) => [f.name, f.id]), expected[type.name], url);
    if (type.name === 'KubernetesObjectReference') {
      const t = type.fields.type!.resolve().resolvedType as typeof type;
      assert.deepEqual(Object.values(t.fields).map((f) => [f.name, f.id]), [['plural', 1], ['group', 2]]);
      const k = type.fields.key!.resolve().resolvedType as typeof type;
      assert.deepEqual(Object.values(k.fields).map((f) => [f.name, f.id]), [['namespace', 1], ['name', 2]]);
    }
  }
});

/** The SPIFFE Workload API standard (workloadapi.proto): [field, number, type, 'repeated' | 'map' | ''] per message. */
const WORKLOAD_API_MESSAGES: Record<string, ReadonlyArray<readonly [string, number, string, string]>> = {
  X509SVIDRequest: [],
  X509SVIDResponse: [['svids', 1, 'X509SVID', 'repeated'], ['crl', 2, 'bytes', 'repeated'], ['federated_bundles', 3, 'bytes', 'map']],
  X509SVID: [['spiffe_id', 1, 'string', ''], ['x509_svid', 2, 'bytes', ''], ['x509_svid_key', 3, 'bytes', ''], ['bundle', 4, 'bytes', ''], ['hint', 5, 'string', '']],
  X509BundlesRequest: [],
  X509BundlesResponse: [['crl', 1, 'bytes', 'repeated'], ['bundles', 2, 'bytes', 'map']],
  JWTSVIDRequest: [['audience', 1, 'string', 'repeated'], ['spiffe_id', 2, 'string', '']],
  JWTSVIDResponse: [['svids', 1, 'JWTSVID', 'repeated']],
  JWTSVID: [['spiffe_id', 1, 'string', ''], ['svid', 2, 'string', ''], ['hint', 3, 'string', '']],
  JWTBundlesRequest: [],
  JWTBundlesResponse: [['bundles', 1, 'bytes', 'map']],
  ValidateJWTSVIDRequest: [['audience', 1, 'string', ''], ['svid', 2, 'string', '']],
  ValidateJWTSVIDResponse: [['spiffe_id', 1, 'string', ''], ['claims', 2, 'google.protobuf.Struct', '']],
};

function shape(field: protobuf.Field): readonly [string, number, string, string] {
  const kind = field.map ? 'map' : field.repeated ? 'repeated' : '';
  if (field instanceof protobuf.MapField) assert.equal(field.keyType, 'string', `${field.name}: map key`);
  else assert.equal(field.map, false);
  return [field.name, field.id, field.resolvedType ? field.resolvedType.fullName.slice(1) : field.type, kind];
}

test('workload.proto has the SPIFFE Workload API messages with the standard field numbers and types', () => {
  const root = protobufRoot([workloadApi.WORKLOAD_API_PROTO]);
  for (const [name, fields] of Object.entries(WORKLOAD_API_MESSAGES)) {
    const type = root.lookupType(name);
    assert.equal(type.fullName, `.${name}`, 'no proto package, as in the standard');
    assert.deepEqual(type.fieldsArray.map(shape), fields, name);
  }
});

test('workload.proto serves SpiffeWorkloadAPI at /SpiffeWorkloadAPI/<Method> with the standard streaming', () => {
  assert.deepEqual(methodPaths(workloadApi.WORKLOAD_API_PROTO, workloadApi.WORKLOAD_API_SERVICE), {
    FetchX509SVID: { path: '/SpiffeWorkloadAPI/FetchX509SVID', requestStream: false, responseStream: true },
    FetchX509Bundles: { path: '/SpiffeWorkloadAPI/FetchX509Bundles', requestStream: false, responseStream: true },
    FetchJWTSVID: { path: '/SpiffeWorkloadAPI/FetchJWTSVID', requestStream: false, responseStream: false },
    FetchJWTBundles: { path: '/SpiffeWorkloadAPI/FetchJWTBundles', requestStream: false, responseStream: true },
    ValidateJWTSVID: { path: '/SpiffeWorkloadAPI/ValidateJWTSVID', requestStream: false, responseStream: false },
  });
  assert.deepEqual(Object.values(workloadApi.WORKLOAD_API_METHOD).sort(), ['FetchJWTBundles', 'FetchJWTSVID', 'FetchX509Bundles', 'FetchX509SVID', 'ValidateJWTSVID']);
  const root = protobufRoot([workloadApi.WORKLOAD_API_PROTO]);
  const service = root.lookupService(workloadApi.WORKLOAD_API_SERVICE);
  const io = Object.fromEntries(service.methodsArray.map((m) => [m.name, [m.requestType, m.responseType]]));
  assert.deepEqual(io, {
    FetchX509SVID: ['X509SVIDRequest', 'X509SVIDResponse'],
    FetchX509Bundles: ['X509BundlesRequest', 'X509BundlesResponse'],
    FetchJWTSVID: ['JWTSVIDRequest', 'JWTSVIDResponse'],
    FetchJWTBundles: ['JWTBundlesRequest', 'JWTBundlesResponse'],
    ValidateJWTSVID: ['ValidateJWTSVIDRequest', 'ValidateJWTSVIDResponse'],
  });
});

test('an X509SVIDResponse encodes with the standard tags (svids 1, crl 2, federated_bundles 3; X509SVID 1-5)', () => {
  const Res = protobufRoot([workloadApi.WORKLOAD_API_PROTO]).lookupType('X509SVIDResponse');
  const bytes = Buffer.from(
    Res.encode(Res.fromObject({ svids: [{ spiffe_id: 'a', x509_svid: Buffer.from([1]), x509_svid_key: Buffer.from([2]), bundle: Buffer.from([3]), hint: 'h' }], crl: [Buffer.from([4])] })).finish(),
  );
  // svids (1, LEN 15): spiffe_id 0a01'a', x509_svid 1201 01, x509_svid_key 1a01 02, bundle 2201 03, hint 2a01'h'; crl (2, LEN 1) 04.
  assert.equal(bytes.toString('hex'), '0a0f0a0161120101' + '1a0102220103' + '2a0168' + '120104');
});

test('protoc compiles workload.proto (as upstream clients would)', { skip: pythonGrpcMissing() }, () => {
  const out = tempDirSync('workload-proto-');
  const r = spawnSync(
    TEST_PYTHON,
    ['-m', 'grpc_tools.protoc', '-I', protoRootFor(workloadApi.WORKLOAD_API_PROTO), '-I', grpcToolsProtoInclude(), '--python_out', out, '--grpc_python_out', out, workloadApi.WORKLOAD_API_PROTO],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
});
