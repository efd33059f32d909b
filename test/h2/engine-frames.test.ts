/**
 * The engine's RFC 9113 rules, byte by byte from a raw-frame client over TCP: preface, SETTINGS
 * ACK, PING ack, unknown frames, stream-id rules, header validation (§8.2-8.3), HPACK errors,
 * CONTINUATION rules, frame size, flow control errors, padding, REFUSED_STREAM, frames split
 * across chunks; and the DoS guards (rapid reset, CONTINUATION/PING/empty-DATA floods).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CLIENT_PREFACE, ErrorCode, Flag, FrameType, frameOf, rstStreamFrame, windowUpdateFrame } from '../../src/h2/frames.js';
import { encodeHeaderBlock } from '../../src/h2/hpack.js';
import type { H2Stream } from '../../src/h2/stream.js';
import { rawConnect, startPlainEngine, type Frame, type RawClient } from './support/engine.js';

let engine: Awaited<ReturnType<typeof startPlainEngine>>;
const REQUEST: Array<[string, string]> = [
  [':method', 'POST'],
  [':scheme', 'https'],
  [':path', '/x'],
  [':authority', 'localhost'],
];

function handler(stream: H2Stream): void {
  // Held: never answered, and its window only returns what it consumes (nothing).
  if (stream.headers[':path'] === '/hold') return stream.manualFlowControl();
  let n = 0;
  stream.ondata = (c) => (n += c.length);
  stream.onend = () => stream.reply([[':status', '200']], Buffer.from(String(n)), [['grpc-status', '0']]);
}

before(async () => {
  engine = await startPlainEngine(handler, { maxConcurrentStreams: 4, maxHeaderListSize: 4096 }, { controlFramesPerSecond: 500, resetsPerSecond: 50 });
});
after(async () => {
  await engine.close();
});

const headers = (sid: number, fields: Array<[string, string]>, flags = Flag.END_HEADERS | Flag.END_STREAM) => frameOf(FrameType.HEADERS, flags, sid, encodeHeaderBlock(fields));
const isGoaway = (f: Frame) => f.type === FrameType.GOAWAY;
const rstOf = (sid: number) => (f: Frame) => f.type === FrameType.RST_STREAM && f.streamId === sid;

async function goawayCode(c: RawClient): Promise<number | undefined> {
  const f = await c.waitFor(isGoaway);
  return f?.payload.readUInt32BE(4);
}

async function rstCode(c: RawClient, sid: number): Promise<number | undefined> {
  return (await c.waitFor(rstOf(sid)))?.payload.readUInt32BE(0);
}

async function connectionErrorCase(frames: Buffer[], code: number): Promise<void> {
  const c = await rawConnect(engine.port);
  c.send(...frames);
  assert.equal(await goawayCode(c), code);
  assert.ok(await c.waitClosed(), 'connection closed after GOAWAY');
}

async function streamErrorCase(frames: Buffer[], sid: number, code: number): Promise<void> {
  const c = await rawConnect(engine.port);
  c.send(...frames);
  assert.equal(await rstCode(c, sid), code);
  // The connection is still usable.
  c.send(headers(sid + 2, REQUEST));
  assert.ok(await c.waitFor((f) => f.type === FrameType.HEADERS && f.streamId === sid + 2));
  c.close();
}

test('§3.4 §6.5 server SETTINGS, ACK of ours, PING ack with the same payload, unknown frame ignored, request answered', async () => {
  const c = await rawConnect(engine.port);
  assert.ok(await c.waitFor((f) => f.type === FrameType.SETTINGS && f.flags === 0));
  assert.ok(await c.waitFor((f) => f.type === FrameType.SETTINGS && f.flags === Flag.ACK));
  c.frame(0xfa, 0xff, 0, Buffer.from('ignored'));
  c.frame(FrameType.PING, 0, 0, Buffer.from('12345678'));
  const ping = await c.waitFor((f) => f.type === FrameType.PING);
  assert.equal(ping?.flags, Flag.ACK);
  assert.equal(ping?.payload.toString(), '12345678');
  c.send(headers(1, REQUEST, Flag.END_HEADERS), frameOf(FrameType.DATA, Flag.END_STREAM, 1, Buffer.from('abc')));
  const data = await c.waitFor((f) => f.type === FrameType.DATA && f.streamId === 1);
  assert.equal(data?.payload.toString(), '3');
  assert.ok(await c.waitFor((f) => f.type === FrameType.HEADERS && f.streamId === 1 && (f.flags & Flag.END_STREAM) !== 0), 'trailers end the stream');
  c.close();
});

test('frames split across chunks (one byte per write) are joined', async () => {
  const c = await rawConnect(engine.port, false);
  const bytes = Buffer.concat([CLIENT_PREFACE, frameOf(FrameType.SETTINGS, 0, 0), headers(1, REQUEST, Flag.END_HEADERS), frameOf(FrameType.DATA, Flag.END_STREAM, 1, Buffer.from('hello'))]);
  for (let i = 0; i < bytes.length; i++) {
    c.socket.write(bytes.subarray(i, i + 1));
    if (i % 16 === 0) await new Promise((r) => setImmediate(r));
  }
  const data = await c.waitFor((f) => f.type === FrameType.DATA && f.streamId === 1);
  assert.equal(data?.payload.toString(), '5');
  c.close();
});

test('§3.4 a bad preface, or no SETTINGS first: PROTOCOL_ERROR', async () => {
  const bad = await rawConnect(engine.port, false);
  bad.send(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
  assert.equal(await goawayCode(bad), ErrorCode.PROTOCOL_ERROR);
  const noSettings = await rawConnect(engine.port, false);
  noSettings.send(CLIENT_PREFACE, frameOf(FrameType.PING, 0, 0, Buffer.alloc(8)));
  assert.equal(await goawayCode(noSettings), ErrorCode.PROTOCOL_ERROR);
});

test('§5.1.1 §6.1 §6.2 stream-id rules: stream 0, even ids, decreasing ids, idle streams', async () => {
  await connectionErrorCase([frameOf(FrameType.DATA, 0, 0, Buffer.from('x'))], ErrorCode.PROTOCOL_ERROR);
  await connectionErrorCase([headers(2, REQUEST)], ErrorCode.PROTOCOL_ERROR);
  await connectionErrorCase([headers(5, REQUEST), headers(3, REQUEST)], ErrorCode.PROTOCOL_ERROR);
  // A stream that ended (answered) is closed: STREAM_CLOSED.
  const c = await rawConnect(engine.port);
  c.send(headers(1, REQUEST));
  assert.ok(await c.waitFor((f) => f.type === FrameType.HEADERS && f.streamId === 1 && (f.flags & Flag.END_STREAM) !== 0));
  c.send(headers(1, REQUEST));
  assert.equal(await goawayCode(c), ErrorCode.STREAM_CLOSED);
  await connectionErrorCase([frameOf(FrameType.DATA, 0, 7, Buffer.from('x'))], ErrorCode.PROTOCOL_ERROR);
  await connectionErrorCase([rstStreamFrame(9, ErrorCode.CANCEL)], ErrorCode.PROTOCOL_ERROR);
  await connectionErrorCase([frameOf(FrameType.PUSH_PROMISE, Flag.END_HEADERS, 1, Buffer.alloc(4))], ErrorCode.PROTOCOL_ERROR);
});

test('§4.2 §6.5 §6.7 frame sizes: above SETTINGS_MAX_FRAME_SIZE, SETTINGS length, SETTINGS ACK with payload, PING length', async () => {
  await connectionErrorCase([frameOf(FrameType.DATA, 0, 1, Buffer.alloc(16385))], ErrorCode.FRAME_SIZE_ERROR);
  await connectionErrorCase([frameOf(FrameType.SETTINGS, 0, 0, Buffer.alloc(5))], ErrorCode.FRAME_SIZE_ERROR);
  await connectionErrorCase([frameOf(FrameType.SETTINGS, Flag.ACK, 0, Buffer.alloc(6))], ErrorCode.FRAME_SIZE_ERROR);
  await connectionErrorCase([frameOf(FrameType.PING, 0, 0, Buffer.alloc(7))], ErrorCode.FRAME_SIZE_ERROR);
});

test('§8.2 §8.3 malformed requests: RST_STREAM PROTOCOL_ERROR, the connection stays', async () => {
  const cases: Array<Array<[string, string]>> = [
    [...REQUEST, ['X-Upper', 'v']],
    [...REQUEST, ['connection', 'keep-alive']],
    [...REQUEST, ['te', 'gzip']],
    REQUEST.filter(([n]) => n !== ':path'),
    REQUEST.filter(([n]) => n !== ':method'),
    [...REQUEST, [':path', '/again']],
    [[':method', 'POST'], ['x-a', 'b'], [':scheme', 'https'], [':path', '/']],
    [...REQUEST, [':status', '200']],
    [...REQUEST, ['x-bad', 'a\r\nb']],
    [...REQUEST, ['content-length', '10']],
  ];
  for (const fields of cases) await streamErrorCase([headers(1, fields)], 1, ErrorCode.PROTOCOL_ERROR);
});

test('§4.3 §6.10 HPACK errors: COMPRESSION_ERROR; CONTINUATION rules: PROTOCOL_ERROR', async () => {
  await connectionErrorCase([frameOf(FrameType.HEADERS, Flag.END_HEADERS, 1, Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]))], ErrorCode.COMPRESSION_ERROR);
  await connectionErrorCase([frameOf(FrameType.CONTINUATION, Flag.END_HEADERS, 1, encodeHeaderBlock(REQUEST))], ErrorCode.PROTOCOL_ERROR);
  const block = encodeHeaderBlock(REQUEST);
  await connectionErrorCase([frameOf(FrameType.HEADERS, 0, 1, block.subarray(0, 4)), frameOf(FrameType.PING, 0, 0, Buffer.alloc(8))], ErrorCode.PROTOCOL_ERROR);
  await connectionErrorCase([frameOf(FrameType.HEADERS, 0, 1, block.subarray(0, 4)), frameOf(FrameType.CONTINUATION, Flag.END_HEADERS, 3, block.subarray(4))], ErrorCode.PROTOCOL_ERROR);
  // Split across CONTINUATION frames correctly: served.
  const c = await rawConnect(engine.port);
  c.send(frameOf(FrameType.HEADERS, Flag.END_STREAM, 1, block.subarray(0, 3)), frameOf(FrameType.CONTINUATION, 0, 1, block.subarray(3, 6)), frameOf(FrameType.CONTINUATION, Flag.END_HEADERS, 1, block.subarray(6)));
  assert.ok(await c.waitFor((f) => f.type === FrameType.HEADERS && f.streamId === 1));
  c.close();
});

test('§6.1 §6.2 padding longer than the payload: PROTOCOL_ERROR; valid padding is stripped', async () => {
  await connectionErrorCase([headers(1, REQUEST, Flag.END_HEADERS), frameOf(FrameType.DATA, Flag.PADDED, 1, Buffer.from([5, 1, 2]))], ErrorCode.PROTOCOL_ERROR);
  const c = await rawConnect(engine.port);
  c.send(headers(1, REQUEST, Flag.END_HEADERS), frameOf(FrameType.DATA, Flag.PADDED | Flag.END_STREAM, 1, Buffer.from([2, 0x41, 0x42, 0, 0])));
  assert.equal((await c.waitFor((f) => f.type === FrameType.DATA && f.streamId === 1))?.payload.toString(), '2');
  c.close();
});

test('§6.9 flow control: WINDOW_UPDATE 0, window overflow, DATA beyond the stream window', async () => {
  await connectionErrorCase([windowUpdateFrame(0, 0)], ErrorCode.PROTOCOL_ERROR);
  await connectionErrorCase([windowUpdateFrame(0, 0x7fffffff)], ErrorCode.FLOW_CONTROL_ERROR);
  await streamErrorCase([headers(1, [...REQUEST, [':path', '/hold']].slice(0, 4).map(([n, v]) => [n, n === ':path' ? '/hold' : v] as [string, string]), Flag.END_HEADERS), windowUpdateFrame(1, 0)], 1, ErrorCode.PROTOCOL_ERROR);
  await streamErrorCase([headers(1, REQUEST.map(([n, v]) => [n, n === ':path' ? '/hold' : v] as [string, string]), Flag.END_HEADERS), windowUpdateFrame(1, 0x7fffffff)], 1, ErrorCode.FLOW_CONTROL_ERROR);
  const over = Array.from({ length: 5 }, () => frameOf(FrameType.DATA, 0, 1, Buffer.alloc(16384)));
  await streamErrorCase([headers(1, REQUEST.map(([n, v]) => [n, n === ':path' ? '/hold' : v] as [string, string]), Flag.END_HEADERS), ...over], 1, ErrorCode.FLOW_CONTROL_ERROR);
});

test('§5.1.2 beyond SETTINGS_MAX_CONCURRENT_STREAMS: REFUSED_STREAM', async () => {
  const hold = REQUEST.map(([n, v]) => [n, n === ':path' ? '/hold' : v] as [string, string]);
  const c = await rawConnect(engine.port);
  c.send(...[1, 3, 5, 7, 9].map((sid) => headers(sid, hold, Flag.END_HEADERS)));
  assert.equal(await rstCode(c, 9), ErrorCode.REFUSED_STREAM);
  assert.equal(c.frames.filter((f) => f.type === FrameType.RST_STREAM).length, 1);
  c.close();
});

test('DoS: rapid reset, CONTINUATION flood, PING flood, empty DATA flood: GOAWAY ENHANCE_YOUR_CALM and close', async () => {
  const hold = REQUEST.map(([n, v]) => [n, n === ':path' ? '/hold' : v] as [string, string]);
  const rapid: Buffer[] = [];
  for (let sid = 1; sid < 400; sid += 2) rapid.push(headers(sid, hold, Flag.END_HEADERS), rstStreamFrame(sid, ErrorCode.CANCEL));
  await connectionErrorCase(rapid, ErrorCode.ENHANCE_YOUR_CALM);
  const continuation = [frameOf(FrameType.HEADERS, 0, 1, encodeHeaderBlock(REQUEST))];
  for (let i = 0; i < 200; i++) continuation.push(frameOf(FrameType.CONTINUATION, 0, 1, Buffer.alloc(0)));
  await connectionErrorCase(continuation, ErrorCode.ENHANCE_YOUR_CALM);
  await connectionErrorCase([frameOf(FrameType.HEADERS, 0, 1, Buffer.alloc(16384, 0x40)), ...Array.from({ length: 4 }, () => frameOf(FrameType.CONTINUATION, 0, 1, Buffer.alloc(16384)))], ErrorCode.ENHANCE_YOUR_CALM);
  await connectionErrorCase(Array.from({ length: 2000 }, () => frameOf(FrameType.PING, 0, 0, Buffer.alloc(8))), ErrorCode.ENHANCE_YOUR_CALM);
  await connectionErrorCase([headers(1, hold, Flag.END_HEADERS), ...Array.from({ length: 2000 }, () => frameOf(FrameType.DATA, 0, 1))], ErrorCode.ENHANCE_YOUR_CALM);
  await connectionErrorCase(Array.from({ length: 2000 }, () => frameOf(FrameType.SETTINGS, 0, 0)), ErrorCode.ENHANCE_YOUR_CALM);
});

test('HEADERS on a stream we reset is ignored; a client GOAWAY lets the open stream finish, then the connection ends', async () => {
  const c = await rawConnect(engine.port);
  c.send(headers(1, [...REQUEST, ['X-Bad', 'v']]));
  assert.equal(await rstCode(c, 1), ErrorCode.PROTOCOL_ERROR);
  c.send(frameOf(FrameType.DATA, Flag.END_STREAM, 1, Buffer.from('late')));
  c.send(headers(3, REQUEST, Flag.END_HEADERS));
  c.send(frameOf(FrameType.GOAWAY, 0, 0, Buffer.alloc(8)));
  c.send(frameOf(FrameType.DATA, Flag.END_STREAM, 3, Buffer.from('ab')));
  assert.equal((await c.waitFor((f) => f.type === FrameType.DATA && f.streamId === 3))?.payload.toString(), '2');
  assert.ok(await c.waitClosed());
  assert.equal(c.frames.filter((f) => f.type === FrameType.RST_STREAM).length, 1, 'no second RST for the late DATA');
});
