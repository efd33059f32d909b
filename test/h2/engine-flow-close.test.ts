/**
 * The engine's receive windows counted exactly, whatever the read boundaries (RFC 9113 §6.9.1:
 * what we advertised, minus what the peer sent, padding included, plus the credit we had
 * written), the SETTINGS acknowledgement bound (§6.5.3) and the two-step graceful close (§6.8),
 * from a raw-frame client over TCP. Every wait is for a frame (bounded), never a timing check;
 * "no error yet" is shown by a PING answered after the frames in question.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCode, Flag, FrameType, frameOf } from '../../src/h2/frames.js';
import { encodeHeaderBlock } from '../../src/h2/hpack.js';
import type { H2Stream } from '../../src/h2/stream.js';
import { rawConnect, startPlainEngine, type RawClient } from './support/engine.js';

const MAX_ID = 0x7fff_ffff;
const fields = (path: string): Array<[string, string]> => [
  [':method', 'POST'],
  [':scheme', 'https'],
  [':path', path],
  [':authority', 'localhost'],
];
const headers = (sid: number, path: string, flags: number = Flag.END_HEADERS) => frameOf(FrameType.HEADERS, flags, sid, encodeHeaderBlock(fields(path)));
const data = (sid: number, n: number, flags: number = 0) => frameOf(FrameType.DATA, flags, sid, Buffer.alloc(n));
/** A PADDED DATA frame of `length` bytes in all: the pad-length byte, `n` data bytes, the padding. */
const padded = (sid: number, n: number, length: number) => frameOf(FrameType.DATA, Flag.PADDED, sid, Buffer.concat([Buffer.from([length - 1 - n]), Buffer.alloc(length - 1)]));

/**
 * Streams of path `/credit-N` manage their own flow and give back exactly the first N data bytes
 * (once N have arrived), then nothing: the window the peer may use is then known exactly.
 * `/answer` replies once the body ends; anything else is held open and never consumes.
 */
function handler(stream: H2Stream): void {
  const path = String(stream.headers[':path']);
  if (path === '/answer') {
    stream.onend = () => stream.reply([[':status', '200']], Buffer.from('ok'), [['grpc-status', '0']]);
    return;
  }
  stream.manualFlowControl();
  const m = /^\/credit-(\d+)$/u.exec(path);
  if (!m) return;
  const credit = Number(m[1]);
  let got = 0;
  stream.ondata = (c) => {
    const before = got;
    got += c.length;
    if (before < credit && got >= credit) stream.consume(credit);
  };
}

let engine: Awaited<ReturnType<typeof startPlainEngine>>;
/** A connection window of 65,535 (the least) and stream windows of 1 MiB: the connection's is the one that binds. */
let connWindowEngine: Awaited<ReturnType<typeof startPlainEngine>>;
let shortTimers: Awaited<ReturnType<typeof startPlainEngine>>;

before(async () => {
  engine = await startPlainEngine(handler);
  connWindowEngine = await startPlainEngine(handler, { connectionWindowSize: 65_535, initialWindowSize: 1 << 20 });
  shortTimers = await startPlainEngine(handler, {}, {}, { settingsAckMs: 1500, drainPingMs: 300 });
});
after(async () => {
  await engine.close();
  await connWindowEngine.close();
  await shortTimers.close();
});

let pings = 0;
/** A PING answered: every frame sent before it was read, and its answers are in `c.frames`. */
async function synced(c: RawClient): Promise<boolean> {
  const payload = Buffer.from(`sync${String(++pings).padStart(4, '0')}`);
  c.frame(FrameType.PING, 0, 0, payload);
  return (await c.waitFor((f) => f.type === FrameType.PING && (f.flags & Flag.ACK) !== 0 && f.payload.equals(payload))) !== undefined;
}

/** The increments of the WINDOW_UPDATEs on `sid` received so far. */
function credited(c: RawClient, sid: number): number {
  return c.frames.filter((f) => f.type === FrameType.WINDOW_UPDATE && f.streamId === sid).reduce((n, f) => n + f.payload.readUInt32BE(0), 0);
}

const errorOf = (c: RawClient, type: number, sid: number) => c.frames.find((f) => f.type === type && f.streamId === sid);

test('§6.9.1 stream window: after a WINDOW_UPDATE, DATA in separate writes up to exactly 65,535 - sent + credited (padding counted) is accepted; one byte more is RST_STREAM FLOW_CONTROL_ERROR', async () => {
  const c = await rawConnect(engine.port);
  c.send(headers(1, '/credit-32768'));
  // 32,768 in two writes: the stream gives them back (one WINDOW_UPDATE of 32,768).
  c.send(data(1, 16_384));
  assert.ok(await synced(c));
  c.send(data(1, 16_384));
  assert.ok(await c.waitFor((f) => f.type === FrameType.WINDOW_UPDATE && f.streamId === 1));
  assert.ok(await synced(c));
  let sent = 32_768;
  const credit = credited(c, 1);
  assert.equal(credit, 32_768, 'the credit the stream gave');
  // What is left, in separate writes (each read alone), the last frame padded to the exact end.
  const allowed = 65_535 - sent + credit;
  for (const n of [16_384, 16_384, 16_384]) {
    c.send(data(1, n));
    sent += n;
    assert.ok(await synced(c), 'read and no error');
  }
  const last = allowed - (sent - 32_768);
  assert.equal(last, 16_383);
  c.send(padded(1, 100, last));
  sent += last;
  assert.ok(await synced(c));
  assert.equal(sent, 65_535 + credit, 'the window is used up exactly');
  assert.equal(errorOf(c, FrameType.RST_STREAM, 1), undefined, 'no error within the window');
  assert.equal(credited(c, 1), credit, 'nothing more given back (the padding of 100+ bytes waits below half the window)');
  // One byte beyond, alone in its write.
  c.send(data(1, 1));
  const rst = await c.waitFor((f) => f.type === FrameType.RST_STREAM && f.streamId === 1);
  assert.equal(rst?.payload.readUInt32BE(0), ErrorCode.FLOW_CONTROL_ERROR);
  assert.ok(await synced(c), 'a stream error: the connection lives on');
  c.close();
});

test('§6.9.1 a held stream (nothing given back): DATA spread over several writes passes 65,535 at the frame that crosses it', async () => {
  const c = await rawConnect(engine.port);
  c.send(headers(1, '/hold'));
  for (let i = 0; i < 3; i++) {
    c.send(data(1, 16_384));
    assert.ok(await synced(c));
  }
  c.send(data(1, 16_383));
  assert.ok(await synced(c));
  assert.equal(errorOf(c, FrameType.RST_STREAM, 1), undefined, '65,535 bytes: exactly the window');
  c.send(padded(1, 0, 1));
  assert.equal((await c.waitFor((f) => f.type === FrameType.RST_STREAM && f.streamId === 1))?.payload.readUInt32BE(0), ErrorCode.FLOW_CONTROL_ERROR, 'a padding-only frame counts');
  c.close();
});

test('§6.9.1 connection window: the credit queued in a read is not usable in that read (GOAWAY FLOW_CONTROL_ERROR); written, it counts exactly', async () => {
  // Exactly the window over separate writes, with the connection's credit in between: accepted.
  const ok = await rawConnect(connWindowEngine.port);
  ok.send(headers(1, '/hold'));
  let sent = 0;
  for (const n of [16_384, 16_384, 16_384, 16_384, 16_383]) {
    ok.send(data(1, n));
    sent += n;
    assert.ok(await synced(ok));
  }
  const credit = credited(ok, 0);
  assert.ok(credit >= 32_768, `the connection gave back what it received (${credit})`);
  const left = 65_535 - sent + credit;
  for (let n = left; n > 0; n -= 16_384) {
    ok.send(data(1, Math.min(16_384, n)));
    assert.ok(await synced(ok));
  }
  assert.equal(errorOf(ok, FrameType.GOAWAY, 0), undefined, `65,535 + ${credited(ok, 0)} bytes over separate writes, every credit written before the next write`);
  ok.close();

  // 32,767 received (just under half: nothing given back), then 32,769 in one write: the credit
  // its first frame earns is queued in that read, so the third frame passes the window.
  const over = await rawConnect(connWindowEngine.port);
  over.send(headers(1, '/hold'));
  over.send(data(1, 16_384));
  over.send(data(1, 16_383));
  assert.ok(await synced(over));
  assert.equal(credited(over, 0), 0);
  over.send(data(1, 16_384), data(1, 16_384), data(1, 1));
  const g = await over.waitFor((f) => f.type === FrameType.GOAWAY);
  assert.equal(g?.payload.readUInt32BE(4), ErrorCode.FLOW_CONTROL_ERROR);
  assert.ok(await over.waitClosed());
});

test('§6.5.3 SETTINGS never acknowledged: GOAWAY SETTINGS_TIMEOUT and closed; acknowledged late but in time: the connection goes on past the bound', async () => {
  const never = await rawConnect(shortTimers.port);
  never.send(headers(1, '/answer', Flag.END_HEADERS | Flag.END_STREAM));
  assert.ok(await never.waitFor((f) => f.type === FrameType.HEADERS && f.streamId === 1), 'served before the ACK');
  const g = await never.waitFor((f) => f.type === FrameType.GOAWAY);
  assert.equal(g?.payload.readUInt32BE(4), ErrorCode.SETTINGS_TIMEOUT);
  assert.ok(await never.waitClosed());

  const late = await rawConnect(shortTimers.port);
  assert.ok(await synced(late), 'a PING round trip before the ACK');
  late.frame(FrameType.SETTINGS, Flag.ACK, 0);
  // Past the bound (a wait, not a measurement: later is as good).
  await new Promise((r) => setTimeout(r, 1700));
  late.send(headers(1, '/answer', Flag.END_HEADERS | Flag.END_STREAM));
  assert.ok(await late.waitFor((f) => f.type === FrameType.HEADERS && f.streamId === 1), 'served after the bound');
  assert.equal(errorOf(late, FrameType.GOAWAY, 0), undefined);
  late.close();
});

/** The connection on `e` the server made last (its newest). */
const newest = (e: typeof engine) => e.connections.at(-1)!;
const goaways = (c: RawClient) => c.frames.filter((f) => f.type === FrameType.GOAWAY).map((f) => [f.payload.readUInt32BE(0) & MAX_ID, f.payload.readUInt32BE(4)]);

test('§6.8 graceful close: GOAWAY(2^31-1) and a PING first; a stream opened before the PING ACK is served; the final GOAWAY names it; later streams are ignored', async () => {
  const c = await rawConnect(engine.port);
  c.frame(FrameType.SETTINGS, Flag.ACK, 0);
  c.send(headers(1, '/answer', Flag.END_HEADERS | Flag.END_STREAM));
  assert.ok(await c.waitFor((f) => f.type === FrameType.HEADERS && f.streamId === 1));
  newest(engine).close();
  const ping = await c.waitFor((f) => f.type === FrameType.PING && (f.flags & Flag.ACK) === 0);
  assert.ok(ping, 'a PING after the first GOAWAY');
  assert.deepEqual(goaways(c), [[MAX_ID, ErrorCode.NO_ERROR]], 'the first GOAWAY: last stream id 2^31-1');
  // In flight when the first GOAWAY arrived: stream 3 (held open) and 5 (answered), then the ACK.
  c.send(headers(3, '/hold'), headers(5, '/answer', Flag.END_HEADERS | Flag.END_STREAM), frameOf(FrameType.PING, Flag.ACK, 0, ping.payload));
  assert.ok(await c.waitFor((f) => f.type === FrameType.HEADERS && f.streamId === 5), 'stream 5, opened after the first GOAWAY, is served');
  assert.ok(await c.waitFor((f) => f.type === FrameType.GOAWAY && (f.payload.readUInt32BE(0) & MAX_ID) === 5));
  assert.deepEqual(goaways(c), [[MAX_ID, ErrorCode.NO_ERROR], [5, ErrorCode.NO_ERROR]], 'the final GOAWAY names the last stream');
  // After it: stream 7 (and its DATA) is ignored; stream 3 still finishes.
  c.send(headers(7, '/answer', Flag.END_HEADERS), data(7, 4, Flag.END_STREAM));
  assert.ok(await synced(c));
  assert.deepEqual(c.frames.filter((f) => f.streamId === 7), [], 'nothing for stream 7: ignored (§6.8)');
  assert.ok(!c.closed, 'open while stream 3 is');
  c.send(frameOf(FrameType.RST_STREAM, 0, 3, Buffer.from([0, 0, 0, ErrorCode.CANCEL])));
  assert.ok(await c.waitClosed(), 'closed once its last stream ended');
});

test('§6.8 graceful close without a PING ACK: the final GOAWAY after the bound; an idle connection then closes', async () => {
  const c = await rawConnect(shortTimers.port);
  c.frame(FrameType.SETTINGS, Flag.ACK, 0);
  assert.ok(await synced(c));
  newest(shortTimers).close();
  assert.ok(await c.waitFor((f) => f.type === FrameType.GOAWAY && (f.payload.readUInt32BE(0) & MAX_ID) === 0), 'the final GOAWAY (no stream was opened)');
  assert.deepEqual(goaways(c), [[MAX_ID, ErrorCode.NO_ERROR], [0, ErrorCode.NO_ERROR]]);
  assert.ok(await c.waitClosed());
});

test('a protocol error during the graceful close is still one GOAWAY with its code, then the close', async () => {
  const c = await rawConnect(engine.port);
  c.frame(FrameType.SETTINGS, Flag.ACK, 0);
  assert.ok(await synced(c));
  newest(engine).close();
  assert.ok(await c.waitFor((f) => f.type === FrameType.PING && (f.flags & Flag.ACK) === 0));
  c.send(headers(2, '/answer'));
  assert.ok(await c.waitClosed());
  assert.deepEqual(goaways(c), [[MAX_ID, ErrorCode.NO_ERROR], [0, ErrorCode.PROTOCOL_ERROR]]);
});
