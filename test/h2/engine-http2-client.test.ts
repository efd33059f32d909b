/**
 * The engine against a real HTTP/2 client (node:http2, i.e. nghttp2, over TLS with ALPN h2):
 * requests with bodies and trailers echoed, many concurrent streams, flow control both ways
 * (1 MiB each way; a client window of 16 bytes), a client reset seen by the handler, PING,
 * graceful close (GOAWAY: the open stream finishes, no new one starts), SETTINGS_MAX_CONCURRENT_STREAMS.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, constants, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { ErrorCode } from '../../src/h2/frames.js';
import type { H2Stream } from '../../src/h2/stream.js';
import { startTlsEngine, type RunningEngine } from './support/engine.js';

let engine: RunningEngine & { certPem: string };
const resets: number[] = [];
const held: H2Stream[] = [];

/** /echo: body and x-* headers back, then trailers; /big?n: n bytes; /hold: answered later; /count: body length. */
function handler(stream: H2Stream): void {
  const path = String(stream.headers[':path']);
  stream.onClose((code) => {
    if (code !== ErrorCode.NO_ERROR) resets.push(code);
  });
  if (path.startsWith('/big')) {
    const n = Number(path.split('?')[1]);
    stream.reply([[':status', '200']], Buffer.alloc(n, 0x61), [['x-done', 'yes']]);
    return;
  }
  if (path === '/hold') {
    held.push(stream);
    return;
  }
  const parts: Buffer[] = [];
  stream.ondata = (c) => parts.push(Buffer.from(c));
  stream.onend = () => {
    const body = Buffer.concat(parts);
    if (path === '/count') return stream.reply([[':status', '200']], Buffer.from(String(body.length)), undefined);
    if (path === '/trailers-only') return stream.reply([[':status', '200'], ['grpc-status', '5']], undefined, undefined);
    stream.reply([[':status', '200'], ['x-echo', String(stream.headers['x-in'] ?? '')]], body, [['x-trailer', 'end'], ['x-len', String(body.length)]]);
  };
}

before(async () => {
  engine = await startTlsEngine(handler, { maxConcurrentStreams: 64 });
});
after(async () => {
  await engine.close();
});

function session(settings?: { initialWindowSize?: number }): Promise<ClientHttp2Session> {
  const s = connect(`https://localhost:${engine.port}`, { ca: engine.certPem, ...(settings ? { settings } : {}) });
  return new Promise((resolve, reject) => {
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

interface Answer {
  headers: IncomingHttpHeaders;
  body: Buffer;
  trailers: IncomingHttpHeaders | undefined;
}

function request(s: ClientHttp2Session, path: string, body?: Buffer, headers: Record<string, string> = {}): Promise<Answer> {
  const req = s.request({ ':method': 'POST', ':path': path, ...headers });
  return new Promise((resolve, reject) => {
    let h: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders | undefined;
    const parts: Buffer[] = [];
    req.on('response', (x) => (h = x));
    req.on('trailers', (t) => (trailers = t));
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve({ headers: h, body: Buffer.concat(parts), trailers }));
    req.on('error', reject);
    req.end(body);
  });
}

test('echo: body, headers and trailers round trip; 200 concurrent streams on one session', async () => {
  const s = await session();
  try {
    const one = await request(s, '/echo', Buffer.from('hello'), { 'x-in': 'abc' });
    assert.equal(one.headers[':status'], 200);
    assert.equal(one.headers['x-echo'], 'abc');
    assert.equal(one.body.toString(), 'hello');
    assert.equal(one.trailers?.['x-trailer'], 'end');
    const many = await Promise.all(Array.from({ length: 200 }, (_, i) => request(s, '/echo', Buffer.from(`body-${i}`), { 'x-in': `v${i}` })));
    many.forEach((a, i) => {
      assert.equal(a.body.toString(), `body-${i}`);
      assert.equal(a.headers['x-echo'], `v${i}`);
      assert.equal(a.trailers?.['x-len'], String(`body-${i}`.length));
    });
    const only = await request(s, '/trailers-only', Buffer.alloc(0));
    assert.equal(only.headers['grpc-status'], '5');
    assert.equal(only.body.length, 0);
  } finally {
    s.close();
  }
});

test('flow control: 1 MiB response through the default window and through a 16-byte one; 1 MiB request', async () => {
  const s = await session();
  const tiny = await session({ initialWindowSize: 16 });
  try {
    const big = await request(s, '/big?1048576');
    assert.equal(big.body.length, 1048576);
    assert.equal(big.trailers?.['x-done'], 'yes');
    const small = await request(tiny, '/big?70000');
    assert.equal(small.body.length, 70000);
    assert.ok(small.body.every((b) => b === 0x61));
    const up = await request(s, '/count', Buffer.alloc(1048576, 1));
    assert.equal(up.body.toString(), '1048576');
  } finally {
    s.close();
    tiny.close();
  }
});

test('a client reset reaches the handler; PING is answered; the session survives', async () => {
  const s = await session();
  try {
    const before = resets.length;
    const req = s.request({ ':method': 'POST', ':path': '/hold' });
    req.on('error', () => undefined);
    await new Promise((r) => setTimeout(r, 100));
    req.close(constants.NGHTTP2_CANCEL);
    for (let i = 0; i < 50 && resets.length === before; i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(resets.slice(before), [ErrorCode.CANCEL]);
    await new Promise<void>((resolve, reject) => s.ping((err) => (err ? reject(err) : resolve())));
    assert.equal((await request(s, '/echo', Buffer.from('x'))).body.toString(), 'x');
  } finally {
    s.close();
  }
});

test('graceful close: GOAWAY lets the open stream finish; its session then ends', async () => {
  const local = await startTlsEngine(handler);
  const s = connect(`https://localhost:${local.port}`, { ca: local.certPem });
  s.on('error', () => undefined);
  const goaway = new Promise<number>((resolve) => s.once('goaway', (code) => resolve(code)));
  const closed = new Promise<void>((resolve) => s.once('close', () => resolve()));
  held.length = 0;
  const pending = request(s, '/hold');
  for (let i = 0; i < 100 && held.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(held.length, 1);
  let serverClosed = false;
  local.server.close(() => (serverClosed = true));
  assert.equal(await goaway, ErrorCode.NO_ERROR);
  held[0]!.reply([[':status', '200']], Buffer.from('late'), undefined);
  assert.equal((await pending).body.toString(), 'late');
  await closed;
  for (let i = 0; i < 100 && !serverClosed; i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(serverClosed);
});
