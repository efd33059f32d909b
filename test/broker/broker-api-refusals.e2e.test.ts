/**
 * What the Broker API refuses, and how it says so, end to end (devcluster over HTTPS, the real CA
 * over TLS, the broker's Unix socket with mTLS):
 * - a client certificate issued by the mesh root with the allow-listed SPIFFE ID is refused
 *   (UNAUTHENTICATED) when it is not an X509-SVID leaf: CA:TRUE, keyCertSign, cRLSign, two URI
 *   SANs, no digitalSignature (made with openssl, signed with the CA's own root key);
 * - every refusal carries google.rpc.Status with a google.rpc.ErrorInfo in
 *   `grpc-status-details-bin` (the SPIFFE Broker API's reasons in domain spiffe.io), decoded by a
 *   grpc-js client and by Python grpcio with classes generated from our protos;
 * - request bytes that do not decode (a string running past the end of its message included: not
 *   read shortened), and a message flagged compressed without grpc-encoding, get INVALID_ARGUMENT
 *   (a raw HTTP/2 client over the socket with TLS), while gzip with a declared encoding still works.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { connect as h2connect, constants as h2c, type ClientHttp2Session } from 'node:http2';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { Client, Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { type Broker, BrokerClient, brokerMessageType, brokerServiceDefinition, encodePodReference, firstMessage, startBroker } from '../../src/broker/index.js';
import { typedMethod } from '../../src/grpc/typed-methods.js';
import { BROKER_PROTO, KUBERNETES_REFERENCE_TYPE_URL, type FetchJWTSVIDRequest, type FetchJWTSVIDResponse } from '../../src/protocol/spiffe-broker.js';
import { createLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { decodeRpcStatus, protoRootFor } from '../../src/grpc/index.js';
import { eventually } from './support/eventually.js';
import { refusedWith } from './support/error-info.js';
import { TEST_PYTHON, opensslMissing, pythonGrpcMissing, writePythonGrpcStubs } from '../support/tools.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack, TD, type Svid } from './support/stack.js';

const run = promisify(execFile);
const PY_CLIENT = [
  fileURLToPath(new URL('./support/broker_api_client.py', import.meta.url)),
  fileURLToPath(new URL('../../../test/broker/support/broker_api_client.py', import.meta.url)),
].find((p) => existsSync(p))!;

const ZTUNNEL_ID = `spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}`;
const SVID_PATH = '/spiffe.broker.API/SubscribeToX509SVID';

/** openssl extension lines for a client leaf carrying the allow-listed ID, per profile. */
const PROFILES: Record<string, { ext: string; problem: string }> = {
  'CA:TRUE': { ext: 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,digitalSignature', problem: 'ERR_SVID_LEAF_IS_CA' },
  keyCertSign: { ext: 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyCertSign', problem: 'ERR_SVID_LEAF_KEY_CERT_SIGN' },
  cRLSign: { ext: 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,cRLSign', problem: 'ERR_SVID_LEAF_CRL_SIGN' },
  'two URI SANs': {
    ext: 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature',
    problem: 'ERR_SVID_URI_SAN_MULTIPLE',
  },
  'no digitalSignature': { ext: 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,keyAgreement', problem: 'ERR_SVID_KEY_USAGE_NO_DIGITAL_SIGNATURE' },
};

interface RawAnswer {
  readonly grpcStatus: number | undefined;
  readonly details: Buffer | undefined;
  /** A response message arrived (the call was served). */
  readonly served: boolean;
}

describe('Broker API refusals: X509-SVID peers, google.rpc.ErrorInfo details, unreadable requests', () => {
  let stack: Stack;
  let broker: Broker;
  let consumer: Svid;
  let client: BrokerClient;
  let cartUid: string;
  let hostnetUid: string;
  let pki: string;
  const logs: string[] = [];

  const clientFor = (certChainPem: string, privateKeyPem: Secret<string>) =>
    new BrokerClient({ socketPath: broker.brokerSocketPath, rootsPem: stack.ca.rootsPem(), certChainPem, privateKeyPem, trustDomain: TD });

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'broker-refusals-', namespaces: ['shop'], serviceAccounts: ['shop/cart', 'shop/hostnet'] });
    broker = await startBroker(stack.brokerConfig({ logger: createLogger({ level: 'info', sink: (l) => logs.push(l) }), name: 'refusals' }));
    await broker.whenReady(AbortSignal.timeout(20_000));
    consumer = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
    client = clientFor(consumer.certChainPem, consumer.privateKeyPem);
    cartUid = await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    hostnetUid = await stack.createPod({ namespace: 'shop', name: 'hostnet-0', serviceAccount: 'hostnet', nodeName: NODE, hostNetwork: true });
    await eventually('cart tracked', () => broker.pods.byUid(cartUid));
    await eventually('hostnet seen', () => broker.pods.ineligibleByUid(hostnetUid));
    // The mesh root's own key (istio-ca-secret), so openssl can issue client leaves it trusts.
    pki = join(stack.dir, 'pki');
    await mkdir(pki, { recursive: true });
    const secret = await stack.core.readNamespacedSecret({ namespace: BROKER_NS, name: 'istio-ca-secret' });
    await writeFile(join(pki, 'root.pem'), Buffer.from(secret.data!['ca-cert.pem']!, 'base64'));
    await writeFile(join(pki, 'root.key'), Buffer.from(secret.data!['ca-key.pem']!, 'base64'), { mode: 0o600 });
  });

  after(async () => {
    client?.close();
    await broker?.stop(500);
    await stack?.close();
  });

  /** A client leaf for ZTUNNEL_ID signed by the mesh root with `ext` (openssl). */
  async function opensslLeaf(name: string, ext: string, uris: readonly string[] = [ZTUNNEL_ID]): Promise<{ certPem: string; keyPem: Secret<string> }> {
    const ossl = (...args: string[]) => execFileSync('openssl', args, { cwd: pki, stdio: ['ignore', 'pipe', 'pipe'] });
    ossl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', '/O=test');
    await writeFile(join(pki, `${name}.ext`), `${ext}\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=critical,${uris.map((u) => `URI:${u}`).join(',')}\n`);
    ossl('x509', '-req', '-in', `${name}.csr`, '-CA', 'root.pem', '-CAkey', 'root.key', '-CAcreateserial', '-out', `${name}.pem`, '-days', '1', '-extfile', `${name}.ext`);
    return { certPem: await readFile(join(pki, `${name}.pem`), 'utf8'), keyPem: new Secret(await readFile(join(pki, `${name}.key`), 'utf8')) };
  }

  it('a mesh-root client certificate with the allow-listed ID is refused when it is not an X509-SVID leaf', { skip: opensslMissing() }, async () => {
    // Control: the same recipe with the X509-SVID profile is served (only the profile differs).
    const good = await opensslLeaf('good', 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature');
    const ok = clientFor(good.certPem, good.keyPem);
    try {
      assert.equal((await firstMessage(ok.subscribeX509Svid({ uid: cartUid }))).svids[0]!.spiffe_id, `spiffe://${TD}/ns/shop/sa/cart`);
    } finally {
      ok.close();
    }
    let i = 0;
    for (const [label, { ext, problem }] of Object.entries(PROFILES)) {
      const uris = label === 'two URI SANs' ? [ZTUNNEL_ID, `spiffe://${TD}/ns/${BROKER_NS}/sa/other`] : [ZTUNNEL_ID];
      const leaf = await opensslLeaf(`bad${i++}`, ext, uris);
      const bad = clientFor(leaf.certPem, leaf.keyPem);
      const logged = logs.length;
      try {
        await assert.rejects(firstMessage(bad.subscribeX509Svid({ uid: cartUid })), refusedWith(GrpcStatus.UNAUTHENTICATED, 'CALLER_UNAUTHENTICATED', 'certbroker'), label);
      } finally {
        bad.close();
      }
      const refusal = logs.slice(logged).find((l) => l.includes('Broker API call refused'));
      assert.ok(refusal?.includes('ERR_CALLER_UNAUTHENTICATED') && refusal.includes(problem), `${label}: logged with ${problem}: ${refusal}`);
    }
  });

  it('every refusal carries google.rpc.Status with ErrorInfo (grpc-js client)', async () => {
    const svid = (ref: Parameters<BrokerClient['subscribeX509Svid']>[0], options?: { header?: boolean }) => firstMessage(client.subscribeX509Svid(ref, options));
    await assert.rejects(svid({ uid: 'not-a-uuid' }), refusedWith(GrpcStatus.INVALID_ARGUMENT, 'WORKLOAD_REFERENCE_INVALID'));
    await assert.rejects(svid({}), refusedWith(GrpcStatus.INVALID_ARGUMENT, 'WORKLOAD_REFERENCE_INVALID'));
    await assert.rejects(svid({ uid: '00000000-0000-4000-8000-000000000000' }), refusedWith(GrpcStatus.NOT_FOUND, 'WORKLOAD_NOT_FOUND'));
    await assert.rejects(svid({ namespace: 'shop', name: 'cart-0', uid: '00000000-0000-4000-8000-000000000000' }), refusedWith(GrpcStatus.NOT_FOUND, 'WORKLOAD_NOT_FOUND'));
    await assert.rejects(svid({ uid: hostnetUid }), refusedWith(GrpcStatus.PERMISSION_DENIED, 'WORKLOAD_NOT_ENTITLED'));
    await assert.rejects(
      firstMessage(client.subscribeX509Bundles({ namespace: 'shop', name: 'nope' })),
      refusedWith(GrpcStatus.NOT_FOUND, 'WORKLOAD_NOT_FOUND'),
    );
    await assert.rejects(svid({ uid: cartUid }, { header: false }), refusedWith(GrpcStatus.INVALID_ARGUMENT, 'MISSING_BROKER_HEADER', 'certbroker'));
    const outsider = await stack.ownSvid('shop', 'cart');
    const off = clientFor(outsider.certChainPem, outsider.privateKeyPem);
    try {
      await assert.rejects(firstMessage(off.subscribeX509Svid({ uid: cartUid })), refusedWith(GrpcStatus.PERMISSION_DENIED, 'CALLER_NOT_AUTHORIZED', 'certbroker'));
    } finally {
      off.close();
    }
    const fetchJwt = typedMethod<FetchJWTSVIDRequest, FetchJWTSVIDResponse>(brokerServiceDefinition(), 'FetchJWTSVID');
    const api = client.serviceClient(Client);
    try {
      const md = new Metadata();
      md.set('broker.spiffe.io', 'true');
      const err = await new Promise<ServiceError | null>((resolve) =>
        api.makeUnaryRequest(fetchJwt.path, fetchJwt.requestSerialize, fetchJwt.responseDeserialize, { audience: ['x'] }, md, (e) => resolve(e)),
      );
      assert.ok(refusedWith(GrpcStatus.UNIMPLEMENTED, 'JWT_PROFILE_DISABLED', 'certbroker')(err));
    } finally {
      api.close();
    }
    // The ErrorInfo names the certbroker code too.
    await assert.rejects(svid({ uid: hostnetUid }), (e: unknown) => {
      const bin = (e as ServiceError).metadata.get('grpc-status-details-bin')[0] as Buffer;
      assert.deepEqual(decodeRpcStatus(bin).errorInfo?.metadata, { code: 'ERR_WORKLOAD_NOT_ENTITLED' });
      return true;
    });
  });

  it('python grpcio decodes the same google.rpc.Status and ErrorInfo', { skip: pythonGrpcMissing() }, async () => {
    const stubs = join(stack.dir, 'py');
    await mkdir(stubs, { recursive: true });
    const root = protoRootFor(BROKER_PROTO);
    await writePythonGrpcStubs(root, stubs, [BROKER_PROTO, 'google/rpc/status.proto', 'google/rpc/error_details.proto']);
    await writeFile(join(stubs, 'roots.pem'), stack.ca.rootsPem());
    await writeFile(join(stubs, 'cert.pem'), consumer.certChainPem);
    await writeFile(join(stubs, 'key.pem'), consumer.privateKeyPem.reveal(), { mode: 0o600 });
    const py = async (rpc: 'svid' | 'bundles', ref: { uid?: string; namespace?: string; name?: string }, header = true) => {
      const { stdout } = await run(TEST_PYTHON, [
        PY_CLIENT, stubs, broker.brokerSocketPath, join(stubs, 'roots.pem'), join(stubs, 'cert.pem'), join(stubs, 'key.pem'),
        broker.ownIdentity, rpc, ref.uid ?? '', ref.namespace ?? '', ref.name ?? '', header ? '1' : '0',
      ]);
      return JSON.parse(stdout) as { spiffe_id?: string; code?: string; details?: string; status?: { code: number; message: string; error_info: Array<{ reason: string; domain: string; metadata: Record<string, string> }> } };
    };
    const control = await py('svid', { uid: cartUid });
    assert.equal(control.spiffe_id, `spiffe://${TD}/ns/shop/sa/cart`, `control: served (${JSON.stringify(control)})`);
    const cases = [
      { ref: { uid: 'nope' }, code: 'INVALID_ARGUMENT', num: GrpcStatus.INVALID_ARGUMENT, reason: 'WORKLOAD_REFERENCE_INVALID', domain: 'spiffe.io' },
      { ref: { namespace: 'shop', name: 'ghost' }, code: 'NOT_FOUND', num: GrpcStatus.NOT_FOUND, reason: 'WORKLOAD_NOT_FOUND', domain: 'spiffe.io' },
      { ref: { uid: hostnetUid }, code: 'PERMISSION_DENIED', num: GrpcStatus.PERMISSION_DENIED, reason: 'WORKLOAD_NOT_ENTITLED', domain: 'spiffe.io' },
      { ref: { uid: cartUid }, header: false, code: 'INVALID_ARGUMENT', num: GrpcStatus.INVALID_ARGUMENT, reason: 'MISSING_BROKER_HEADER', domain: 'certbroker' },
    ];
    for (const c of cases) {
      for (const rpc of ['svid', 'bundles'] as const) {
        const out = await py(rpc, c.ref, c.header ?? true);
        assert.equal(out.code, c.code, JSON.stringify(out));
        assert.equal(out.status?.code, c.num, JSON.stringify(out));
        assert.equal(out.status?.message, out.details);
        assert.equal(out.status?.error_info.length, 1, JSON.stringify(out));
        assert.equal(out.status?.error_info[0]!.reason, c.reason);
        assert.equal(out.status?.error_info[0]!.domain, c.domain);
      }
    }
  });

  describe('unreadable request bytes (raw HTTP/2 over the socket with TLS)', () => {
    let session: ClientHttp2Session;

    before(() => {
      session = h2connect('https://localhost', {
        createConnection: () =>
          tlsConnect({
            path: broker.brokerSocketPath,
            ca: stack.ca.rootsPem(),
            cert: consumer.certChainPem,
            key: consumer.privateKeyPem.reveal(),
            ALPNProtocols: ['h2'],
            checkServerIdentity: () => undefined,
          }),
      });
      session.on('error', () => undefined);
    });
    after(() => session?.close());

    /** One call; `pieces` > 1 sends the body in that many separate writes (DATA frames). */
    function call(body: Buffer, headers: Record<string, string> = {}, pieces = 1): Promise<RawAnswer> {
      return new Promise((resolve) => {
        const req = session.request({ ':method': 'POST', ':path': SVID_PATH, 'content-type': 'application/grpc', te: 'trailers', 'broker.spiffe.io': 'true', ...headers });
        let grpcStatus: number | undefined;
        let details: Buffer | undefined;
        let served = false;
        const take = (h: Record<string, unknown>) => {
          if (h['grpc-status'] !== undefined) grpcStatus = Number(h['grpc-status']);
          const bin = h['grpc-status-details-bin'];
          if (typeof bin === 'string') details = Buffer.from(bin, 'base64');
        };
        req.on('response', take);
        req.on('trailers', take);
        req.on('data', () => {
          served = true;
          req.close(h2c.NGHTTP2_CANCEL);
        });
        req.on('error', () => undefined);
        req.on('close', () => resolve({ grpcStatus, details, served }));
        // Each piece goes out in its own turn of the event loop, so in its own DATA frame.
        const size = Math.ceil(body.length / pieces);
        const send = (at: number): void => {
          if (at + size >= body.length) req.end(body.subarray(at));
          else req.write(body.subarray(at, at + size), () => setImmediate(() => send(at + size)));
        };
        send(0);
      });
    }
    const frame = (payload: Uint8Array, flag = 0): Buffer => {
      const out = Buffer.alloc(5 + payload.length);
      out[0] = flag;
      out.writeUInt32BE(payload.length, 1);
      out.set(payload, 5);
      return out;
    };
    const request = (): Uint8Array => {
      const Req = brokerMessageType('spiffe.broker.SubscribeToX509SVIDRequest');
      return Req.encode(Req.fromObject({ reference: { reference: encodePodReference({ uid: cartUid }) } })).finish();
    };
    const assertRefused = (a: RawAnswer, what: string) => {
      assert.equal(a.served, false, `${what}: not served`);
      assert.equal(a.grpcStatus, GrpcStatus.INVALID_ARGUMENT, `${what}: INVALID_ARGUMENT, not ${a.grpcStatus}`);
      assert.ok(a.details, `${what}: grpc-status-details-bin present`);
      const st = decodeRpcStatus(a.details);
      assert.equal(st.code, GrpcStatus.INVALID_ARGUMENT);
      assert.deepEqual(st.errorInfo, { reason: 'WORKLOAD_REFERENCE_INVALID', domain: 'spiffe.io', metadata: { code: 'ERR_REQUEST_MALFORMED' } });
    };

    it('a well-formed request is served (control)', async () => {
      assert.equal((await call(frame(request()))).served, true);
    });

    it('bytes that do not decode as the request message get INVALID_ARGUMENT, not INTERNAL', async () => {
      const before = logs.length;
      assertRefused(await call(frame(Buffer.from([0x0a, 0x05, 0x0a]))), 'truncated length-delimited field');
      assertRefused(await call(frame(Buffer.from([0x0f, 0xff, 0xff]))), 'invalid wire type');
      // Read by protobufjs alone, refused by the strict decoder (src/grpc/strict-decode.ts):
      assertRefused(await call(frame(Buffer.concat([Buffer.from([0x08, 0x00]), request()]))), 'the reference field sent as a varint (wire type 0)');
      assertRefused(await call(frame(Buffer.concat([Buffer.from([0x00, 0x01]), request()]))), 'a field numbered 0');
      assertRefused(await call(frame(Buffer.concat([Buffer.from([0xa3, 0x06, 0xac, 0x06]), request()]))), "an unknown group closed by another field's end tag");
      assertRefused(await call(frame(Buffer.from([0x0a, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0xff]))), 'a type_url that is not UTF-8');
      assert.ok(logs.slice(before).some((l) => l.includes('Broker API call refused') && l.includes('ERR_REQUEST_MALFORMED')), 'logged with its code');
      assert.equal((await call(frame(request()))).served, true, 'the connection keeps working');
    });

    it('a string running past the end of its message is refused, not read shortened', async () => {
      // field `n`, length-delimited, declaring `declared` bytes (default: the payload's length).
      const ld = (n: number, payload: Buffer, declared = payload.length): Buffer => {
        assert.ok(declared < 128);
        return Buffer.concat([Buffer.from([(n << 3) | 2, declared]), payload]);
      };
      const svidRequest = (any: Buffer) => ld(1, ld(1, any)); // SubscribeToX509SVIDRequest{reference: WorkloadReference{reference: any}}
      const url = KUBERNETES_REFERENCE_TYPE_URL;
      // Any.type_url declares 127 bytes; the Any (and the messages around it) end after 34.
      const shortUrl = url.slice(0, 34);
      assertRefused(await call(frame(svidRequest(ld(1, Buffer.from(shortUrl), 127)))), 'type_url past the end of the Any');
      // The packed KubernetesObjectReference's uid runs past the end of Any.value: declared 37
      // bytes with cart's 36-byte UID present (protobufjs alone read it as that UID and served
      // cart's SVID), and declared 36 with 3 present (read as "abc": "uid is not a UUID").
      const podType = ld(1, Buffer.concat([ld(1, Buffer.from('pods')), ld(2, Buffer.from('core'))]));
      // Bytes that do not decode are the request's malformation wherever they sit (the type_url
      // above is in the request message, these uids inside Any.value): the same code, logged. A
      // uid that is not UTF-8 does not decode either.
      const withUid = (uid: Buffer, declared = uid.length) => svidRequest(Buffer.concat([ld(1, Buffer.from(url)), ld(2, Buffer.concat([podType, ld(3, uid, declared)]))]));
      const before = logs.length;
      for (const [uid, declared] of [[Buffer.from(cartUid), 37], [Buffer.from('abc'), 36], [Buffer.from([0xc3, 0x28]), 2]] as const) {
        const a = await call(frame(withUid(uid, declared)));
        assertRefused(a, `uid ${uid.toString('hex')} declared ${declared}`);
        assert.match(decodeRpcStatus(a.details!).message, /^request cannot be read: workload reference does not decode as a spiffe\.broker\.KubernetesObjectReference/);
      }
      assert.ok(logs.slice(before).some((l) => l.includes('Broker API call refused') && l.includes('does not decode')), 'logged');
      // A reference that decodes but names no pod is the reference's fault: ERR_WORKLOAD_REFERENCE_INVALID.
      const st = decodeRpcStatus((await call(frame(withUid(Buffer.from('abc'))))).details!);
      assert.deepEqual(st.errorInfo, { reason: 'WORKLOAD_REFERENCE_INVALID', domain: 'spiffe.io', metadata: { code: 'ERR_WORKLOAD_REFERENCE_INVALID' } });
      assert.equal(st.message, 'uid is not a UUID');
      assert.equal((await call(frame(request()))).served, true, 'the connection keeps working');
    });

    it('a message flagged compressed without grpc-encoding (or with identity, or a flag of 2) is refused; gzip declared is served', async () => {
      assertRefused(await call(frame(request(), 1)), 'flag 1 without grpc-encoding');
      assertRefused(await call(frame(request(), 1), { 'grpc-encoding': 'identity' }), 'flag 1 with grpc-encoding identity');
      assertRefused(await call(frame(request(), 2)), 'flag 2');
      assertRefused(await call(frame(request(), 1), {}, 7), 'flag 1, the message split over several DATA frames');
      assert.equal((await call(frame(request()), {}, 7)).served, true, 'uncompressed, split, is served');
      assert.equal((await call(frame(gzipSync(request()), 1), { 'grpc-encoding': 'gzip' })).served, true, 'gzip with grpc-encoding: gzip');
      assert.equal((await call(frame(request()))).served, true, 'uncompressed still served');
    });
  });
});

