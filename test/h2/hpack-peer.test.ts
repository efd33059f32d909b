/**
 * h2/hpack against a real peer, nghttp2 (inside node:http2): a raw TCP server reads the client
 * preface and frames of `http2.connect` clients sending several requests with varied headers
 * (nghttp2's encoder: Huffman coding, dynamic table insertions and references, never-indexed
 * sensitive fields, a field too large to index) and our decoder must yield exactly the fields sent;
 * the server answers each with a HEADERS frame our encoder wrote, which the client must read back.
 * A second encoder, gRPC core's chttp2 (Python grpcio), sends CA-shaped calls whose metadata must
 * decode the same way.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { test } from 'node:test';
import { HpackDecoder, HpackEncoder, encodeHeaderBlock, type HeaderField } from '../../src/h2/hpack.js';
import { TEST_PYTHON, pythonGrpcMissing } from '../support/tools.js';
import { frameBytes } from './support/frame-client.js';

const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';

/** A raw h2c server: SETTINGS handshake, HEADERS (+CONTINUATION) blocks decoded, answered by `respond`. */
interface RawServer {
  readonly server: net.Server;
  readonly requests: HeaderField[][];
  /** Rejects with the error code of the first GOAWAY a client sends (node's stream then never settles). */
  readonly refused: Promise<never>;
}

function rawServer(respond: (fields: HeaderField[]) => Buffer): RawServer {
  const requests: HeaderField[][] = [];
  let refuse: (code: number) => void = () => undefined;
  const refused = new Promise<never>((_, reject) => {
    refuse = (code) => reject(new Error(`the client sent GOAWAY with error code ${code}`));
  });
  refused.catch(() => undefined);
  const server = net.createServer((sock) => {
    const decoder = new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: 1 << 20 });
    let buf = Buffer.alloc(0);
    let prefaced = false;
    let block: Buffer[] = [];
    sock.write(frameBytes(4, 0, 0, Buffer.alloc(0)));
    sock.on('error', () => undefined);
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (!prefaced) {
        if (buf.length < PREFACE.length) return;
        assert.equal(buf.subarray(0, PREFACE.length).toString('latin1'), PREFACE);
        buf = buf.subarray(PREFACE.length);
        prefaced = true;
      }
      while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
        const len = buf.readUIntBE(0, 3);
        const [type, flags] = [buf[3]!, buf[4]!];
        const stream = buf.readUInt32BE(5) & 0x7fffffff;
        let payload = buf.subarray(9, 9 + len);
        buf = buf.subarray(9 + len);
        if (type === 4 && (flags & 1) === 0) sock.write(frameBytes(4, 1, 0, Buffer.alloc(0)));
        if (type === 7) {
          // GOAWAY: the client refused something (COMPRESSION_ERROR = 9 for a block it cannot decode).
          refuse(payload.readUInt32BE(4));
          sock.destroy();
          return;
        }
        if (type !== 1 && type !== 9) continue;
        if (type === 1 && (flags & 0x8) !== 0) payload = payload.subarray(1, payload.length - payload[0]!);
        if (type === 1 && (flags & 0x20) !== 0) payload = payload.subarray(5);
        block.push(payload);
        if ((flags & 0x4) === 0) continue;
        const fields: HeaderField[] = [];
        assert.equal(decoder.decode(Buffer.concat(block), (n, v) => fields.push([n, v])), true);
        block = [];
        requests.push(fields);
        sock.write(frameBytes(1, 0x5, stream, respond(fields)));
      }
    });
  });
  return { server, requests, refused };
}

/** The response headers of `req`, or a rejection when the stream closes (or fails) without them. */
async function responseOf(req: http2.ClientHttp2Stream, refused: Promise<never>): Promise<http2.IncomingHttpHeaders> {
  const closed = once(req, 'close').then(() => {
    throw new Error(`stream closed without response headers (rst code ${req.rstCode})`);
  });
  const [headers] = (await Promise.race([once(req, 'response'), closed, refused])) as [http2.IncomingHttpHeaders];
  return headers;
}

const HIGH = Array.from({ length: 128 }, (_, i) => String.fromCharCode(0x80 + i)).join('');
const PRINTABLE = Array.from({ length: 95 }, (_, i) => String.fromCharCode(0x20 + i)).join('');

function requestHeaders(i: number): Record<string, string> {
  return {
    'content-type': 'application/grpc',
    te: 'trailers',
    'user-agent': 'grpc-node-js/1.12.0',
    'grpc-accept-encoding': 'identity,deflate,gzip',
    'grpc-timeout': `${9990 + i}m`,
    'x-printable': `${PRINTABLE}\t${i}`,
    'x-high-bytes': i % 2 === 0 ? HIGH : 'same',
    ...(i === 2 ? { 'x-large': 'L'.repeat(5000) } : {}),
    ...(i >= 3 ? { 'x-new-each-time': `v${i}`.repeat(i) } : {}),
  };
}

test('nghttp2-encoded request blocks decode to exactly the fields sent; our response blocks are read by nghttp2', async () => {
  const encoder = new HpackEncoder();
  const head = encodeHeaderBlock([[':status', '200'], ['content-type', 'application/grpc']]);
  const { server, requests, refused } = rawServer((fields) => {
    const echo = fields.find(([n]) => n === 'x-printable')?.[1] ?? '';
    // nghttp2 drops a received value with leading or trailing whitespace (RFC 9113 8.2.1): bracket it.
    return encoder.encode([['x-echo', `[${echo}]`], ['x-high', HIGH], ['grpc-status', '0']], head);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  const client = http2.connect(`http://127.0.0.1:${port}`);
  try {
    const sent: Array<Record<string, string>> = [];
    for (let i = 0; i < 6; i++) {
      const path = `/istio.v1.auth.IstioCertificateService/CreateCertificate${i % 3 === 0 ? '' : `?n=${i}`}`;
      const headers: Record<string, string> = { ':method': 'POST', ':path': path, ...requestHeaders(i) };
      sent.push(headers);
      const sensitive = i === 1 ? { authorization: 'Bearer secret-token', [http2.sensitiveHeaders]: ['authorization'] } : {};
      const req = client.request({ ...headers, ...sensitive }, { endStream: true });
      if (i === 1) sent[i] = { ...headers, authorization: 'Bearer secret-token' };
      const got = await responseOf(req, refused);
      assert.equal(got[':status'], 200);
      assert.equal(got['content-type'], 'application/grpc');
      assert.equal(got['x-echo'], `[${headers['x-printable']}]`);
      assert.equal(got['x-high'], HIGH);
      assert.equal(got['grpc-status'], '0');
      req.resume();
      req.close();
    }
    assert.equal(requests.length, 6);
    requests.forEach((fields, i) => {
      const want = { ...sent[i]!, ':scheme': 'http', ':authority': `127.0.0.1:${port}` };
      assert.deepEqual(Object.fromEntries(fields), want, `request ${i}`);
      assert.equal(fields.length, Object.keys(want).length, `request ${i}: no field twice`);
    });
  } finally {
    client.close();
    server.close();
  }
});

test('after the peer lowers SETTINGS_HEADER_TABLE_SIZE, the next block starts with a size update nghttp2 accepts', async () => {
  const encoder = new HpackEncoder();
  let n = 0;
  const { server, refused } = rawServer(() => {
    if (n++ === 0) encoder.peerTableSizeChanged();
    return encoder.encode([[':status', '200'], ['x-n', String(n)]]);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = http2.connect(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, { settings: { headerTableSize: 0 } });
  try {
    for (let i = 1; i <= 2; i++) {
      const req = client.request({ ':path': '/' }, { endStream: true });
      const got = await responseOf(req, refused);
      assert.equal(got['x-n'], String(i));
      req.resume();
      req.close();
    }
  } finally {
    client.close();
    server.close();
  }
});

/** Python grpcio: `calls` unary calls on one channel, each with its own metadata; prints each status. */
const GRPCIO_CLIENT = `
import sys, grpc
port, calls = sys.argv[1], int(sys.argv[2])
ch = grpc.insecure_channel('127.0.0.1:' + port)
call = ch.unary_unary('/istio.v1.auth.IstioCertificateService/CreateCertificate', request_serializer=lambda b: b, response_deserializer=lambda b: b)
for i in range(calls):
    try:
        call(b'x' * 10, metadata=[('authorization', 'Bearer ' + 'tok' * 300), ('clusterid', 'Kubernetes'), ('x-call', str(i) * (i + 1))], timeout=30)
        print('OK')
    except grpc.RpcError as e:
        print(e.code().name)
ch.close()
`;

test('gRPC core (Python grpcio) request blocks decode to its calls\' metadata', { skip: pythonGrpcMissing() }, async () => {
  const answer = encodeHeaderBlock([[':status', '200'], ['content-type', 'application/grpc'], ['grpc-status', '0']]);
  const { server, requests } = rawServer(() => answer);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  try {
    const py = spawn(TEST_PYTHON, ['-c', GRPCIO_CLIENT, String(port), '4'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    py.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const [code] = (await once(py, 'exit')) as [number | null];
    assert.equal(code, 0, out);
    assert.equal(out.trim().split('\n').length, 4, out);
    assert.equal(requests.length, 4);
    requests.forEach((fields, i) => {
      const map = Object.fromEntries(fields);
      assert.equal(fields.length, Object.keys(map).length, `call ${i}: no field twice`);
      assert.equal(map[':method'], 'POST');
      assert.equal(map[':path'], '/istio.v1.auth.IstioCertificateService/CreateCertificate');
      assert.equal(map[':authority'], `127.0.0.1:${port}`);
      assert.equal(map.te, 'trailers');
      assert.equal(map['content-type'], 'application/grpc');
      assert.match(map['user-agent'] ?? '', /grpc-python/u);
      assert.match(map['grpc-timeout'] ?? '', /^\d{1,8}[HMSmun]$/u);
      assert.equal(map.authorization, `Bearer ${'tok'.repeat(300)}`);
      assert.equal(map.clusterid, 'Kubernetes');
      assert.equal(map['x-call'], String(i).repeat(i + 1));
    });
  } finally {
    server.close();
  }
});
