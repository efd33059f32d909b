/**
 * HTTP/2 conformance of the CA's TLS transports, h2spec-like: a raw-frame client
 * (support/frame-client.ts) sends exactly the frames a case names and checks the server's answer
 * against RFC 9113 (each case names its section), then a full gRPC CreateCertificate and health
 * Check in raw frames, and the DoS cases (rapid reset, CONTINUATION, PING, SETTINGS and empty-DATA
 * floods), and, on a CA of their own with short timers, the SETTINGS acknowledgement bound (§6.5.3)
 * and the two-step graceful close (§6.8). Every case runs against each kind in H2_TRANSPORT_KINDS,
 * on the CA as deployed.
 *
 * Where node:http2 (nghttp2 under the 'http2' kind) deviates from the RFC's wording, the case
 * says so precisely in `NODE_HTTP2_DEVIATIONS` and asserts node's actual behaviour for that kind
 * only; any other kind must meet the RFC. Nothing asserts how long anything took: each wait for
 * a frame is bounded (FRAME_WAIT_MS) and a case ends on what arrived.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { protobufRoot } from '../../src/grpc/index.js';
import { RETRY_PUSHBACK_METADATA } from '../../src/protocol/grpc-status.js';
import { HEALTH_CHECK_PATH } from '../../src/protocol/grpc-health.js';
import { CREATE_CERTIFICATE_PATH } from '../../src/protocol/istio-ca.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { requestBytes } from '../ca/support/raw-grpc.js';
import {
  ACK,
  continuationFrame,
  dataFrame,
  END_HEADERS,
  END_STREAM,
  ErrorCode,
  errorName,
  FrameClient,
  frameBytes,
  FrameType,
  FRAME_WAIT_MS,
  goawayFrame,
  grpcMessage,
  grpcRequestFields,
  headersFrame,
  literalBlock,
  PADDED,
  pingFrame,
  PREFACE,
  rstStreamFrame,
  Setting,
  settingsFrame,
  settingsOf,
  windowUpdateFrame,
  type Frame,
  type StreamOutcome,
} from './support/frame-client.js';
import { H2_TRANSPORT_KINDS, startTarget, type H2Target, type H2TransportKind } from './support/targets.js';

/** Per-connection and global stream caps small enough to reach (SETTINGS_MAX_CONCURRENT_STREAMS, CA_MAX_STREAMS). */
const MAX_CONCURRENT = 8;
const MAX_STREAMS = 12;
/** How long a connection may take to close after its GOAWAY before the case calls it left open. */
const CLOSE_WAIT_MS = 5000;
/** The short SETTINGS acknowledgement bound and idle timeout of the timer cases' CA (its defaults: 10 s, 300 s). */
const SETTINGS_ACK_MS = 2000;
const IDLE_MS = 5000;

const Response = protobufRoot(['istio/v1/auth/ca.proto']).lookupType('istio.v1.auth.IstioCertificateResponse');

/**
 * Where node:http2 (its bundled nghttp2) answers differently from RFC 9113's wording, measured
 * against Node 20's; the 'http2' kind is held to these, every other kind to the RFC.
 */
const NODE_HTTP2_DEVIATIONS: Readonly<Record<string, { readonly observed: string; readonly why: string }>> = {
  'a bad preface': { observed: 'GOAWAY INTERNAL_ERROR', why: 'node ends the session for a bad preface with its own INTERNAL_ERROR, not PROTOCOL_ERROR' },
  'SETTINGS on stream 1': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the invalid frame; node destroys the session with INTERNAL_ERROR' },
  'ENABLE_PUSH 2': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the invalid frame; node destroys the session with INTERNAL_ERROR' },
  'an unsolicited PING ACK': { observed: 'GOAWAY INTERNAL_ERROR', why: 'node deliberately treats a PING ACK it has no PING for as a connection error' },
  'stream 2 from the client': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the invalid frame; node destroys the session with INTERNAL_ERROR' },
  'RST_STREAM on idle stream 7': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the invalid frame; node destroys the session with INTERNAL_ERROR' },
  'WINDOW_UPDATE 0 on stream 1': { observed: 'GOAWAY INTERNAL_ERROR', why: 'a stream error by the RFC; node ends the whole session with INTERNAL_ERROR' },
  'DATA on closed stream 1': { observed: 'ignored', why: 'nghttp2 silently drops DATA on a stream it already closed (RFC 9113 §6.1 wants STREAM_CLOSED)' },
  'DATA after END_STREAM': { observed: 'GOAWAY STREAM_CLOSED', why: 'the RFC allows a stream error; nghttp2 makes it a connection error (allowed: "either")' },
  'stream window 65535 + 2^31-1': { observed: 'RST_STREAM FLOW_CONTROL_ERROR, then the connection is lost', why: 'the stream is reset as the RFC says, and node then ends the session too' },
  [`stream ${MAX_CONCURRENT + 1} of ${MAX_CONCURRENT}`]: { observed: 'closed without GOAWAY', why: 'node closes the connection without RST_STREAM REFUSED_STREAM or GOAWAY for a stream beyond its SETTINGS_MAX_CONCURRENT_STREAMS' },
  'MAX_FRAME_SIZE 16383': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the invalid frame; node destroys the session with INTERNAL_ERROR' },
  'PING on stream 1': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the invalid frame; node destroys the session with INTERNAL_ERROR' },
  'HEADERS on stream 0': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the invalid frame; node destroys the session with INTERNAL_ERROR' },
  'WINDOW_UPDATE on idle stream 7': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the invalid frame; node destroys the session with INTERNAL_ERROR' },
  'WINDOW_UPDATE 0 on the connection': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the invalid frame; node destroys the session with INTERNAL_ERROR' },
  'connection window 65535 + 2^31-1': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the flow-control error; node destroys the session with INTERNAL_ERROR, not FLOW_CONTROL_ERROR' },
  'stream 3 after 5': { observed: 'ignored', why: 'nghttp2 ignores a HEADERS with a stream id lower than the last one opened (it treats it as a closed stream) instead of PROTOCOL_ERROR' },
  'HEADERS on closed stream 1': { observed: 'ignored', why: 'nghttp2 silently drops HEADERS on a stream it already closed (RFC 9113 §5.1 wants STREAM_CLOSED)' },
  'INITIAL_WINDOW_SIZE 2^31': { observed: 'GOAWAY INTERNAL_ERROR', why: 'nghttp2 reports the bad setting; node destroys the session with INTERNAL_ERROR, not FLOW_CONTROL_ERROR' },
  'rapid reset': { observed: 'GOAWAY INTERNAL_ERROR', why: "nghttp2's reset rate limit ends the session; node sends INTERNAL_ERROR, not ENHANCE_YOUR_CALM" },
  'SETTINGS never acknowledged': { observed: 'GOAWAY NO_ERROR', why: "node:http2 has no SETTINGS acknowledgement timeout (§6.5.3's MAY): the connection lives until the CA's idle timeout closes it" },
  'graceful close': { observed: 'GOAWAY NO_ERROR last 0, no PING', why: "node's Http2Session.close() is one GOAWAY with the last stream id processed, no PING: a stream the client opens while it is in flight is not processed (§6.8 recommends two steps)" },
};

/**
 * RFC 9113 §5.4.1: after a GOAWAY for an error the endpoint MUST close the TCP connection. For the
 * errors nghttp2 itself detects, node:http2 sends the GOAWAY with the right code but leaves the
 * connection open for the peer to close; the 'http2' kind is excused this part only.
 */
const NODE_LEAVES_OPEN = ', connection left open';

function deviation(kind: H2TransportKind, id: string): { readonly observed: string; readonly why: string } | undefined {
  return kind === 'http2' ? NODE_HTTP2_DEVIATIONS[id] : undefined;
}

function describeEnd(o: StreamOutcome): string {
  if (o.how === 'reset' || o.how === 'goaway') return `${o.how} ${errorName(o.code ?? -1)}`;
  if (o.how === 'ended') return `ended (status ${o.fields[':status'] ?? '?'}, grpc-status ${o.fields['grpc-status'] ?? '-'})`;
  return o.how;
}

/** Request HEADERS for a gRPC call to `path` (END_HEADERS; END_STREAM when `end`). */
function grpcHeaders(stream: number, path: string, o: { readonly end?: boolean; readonly extra?: ReadonlyArray<readonly [string, string]> } = {}): Buffer {
  return headersFrame(stream, literalBlock(grpcRequestFields(path, o.extra)), END_HEADERS | (o.end ? END_STREAM : 0));
}

/** A health Check of the whole server (an empty HealthCheckRequest) on `stream`, complete. */
function healthCheck(stream: number): Buffer {
  return Buffer.concat([grpcHeaders(stream, HEALTH_CHECK_PATH), dataFrame(stream, grpcMessage(Buffer.alloc(0)), END_STREAM)]);
}

/** The answer of a health Check: 200, application/grpc, SERVING (field 1 = 1), grpc-status 0. */
function assertServing(o: StreamOutcome, what: string): void {
  assert.equal(describeEnd(o), 'ended (status 200, grpc-status 0)', what);
  assert.equal(o.fields['content-type'], 'application/grpc', what);
  assert.deepEqual([...o.body], [0, 0, 0, 0, 2, 0x08, 0x01], `${what}: one message, status SERVING`);
}

for (const kind of H2_TRANSPORT_KINDS) {
  describe(`HTTP/2 conformance (RFC 9113) of the CA's '${kind}' transport`, () => {
    let t: H2Target;
    const clients: FrameClient[] = [];

    before(async () => {
      t = await startTarget(kind, { maxConcurrentStreams: MAX_CONCURRENT, maxStreams: MAX_STREAMS });
    });

    after(async () => {
      for (const c of clients) c.close();
      await t?.close();
    });

    /** A connection, preface and SETTINGS exchanged unless `handshake` is false. */
    async function open(settings: ReadonlyArray<readonly [number, number]> = [], handshake = true): Promise<FrameClient> {
      const c = await FrameClient.connect(t);
      clients.push(c);
      if (handshake) await c.handshake(settings);
      return c;
    }

    /** The server still serves: a new connection answers a health Check. */
    async function stillServing(what: string): Promise<void> {
      const c = await open();
      c.send(healthCheck(1));
      assertServing(await c.streamEnd(1), `${what}: a new connection is served`);
      c.close();
    }

    /**
     * What the server did about an offending frame: `GOAWAY <code>` (and whether it then closed),
     * `RST_STREAM <code>` on `stream` (and whether the connection lived on), `ignored` (a PING still
     * answered), or how the stream ended otherwise.
     */
    async function outcomeOf(c: FrameClient, stream: number): Promise<string> {
      const closedAfter = async (code: number) => `GOAWAY ${errorName(code)}${(await c.drain(CLOSE_WAIT_MS)) === 'closed' ? '' : ', connection left open'}`;
      if (stream === 0) {
        const f = await c.nextOf((x) => x.type === FrameType.GOAWAY);
        if (f === 'closed') return 'closed without GOAWAY';
        if (f === 'timeout') return (await c.ping()) ? 'ignored' : 'no answer';
        return closedAfter(f.payload.readUInt32BE(4));
      }
      const o = await c.streamEnd(stream);
      if (o.how === 'goaway') return closedAfter(o.code ?? -1);
      if (o.how === 'reset') return `RST_STREAM ${errorName(o.code ?? -1)}${(await c.ping()) ? '' : ', then the connection is lost'}`;
      if (o.how === 'timeout') return (await c.ping()) ? 'ignored' : 'no answer';
      if (o.how === 'closed') return 'closed without GOAWAY';
      return describeEnd(o);
    }

    /** Asserts `c`'s outcome is one the RFC allows (`rfc`), or, for 'http2', node's recorded deviation for `what`. */
    async function expectOutcome(c: FrameClient, stream: number, what: string, rfc: readonly string[]): Promise<void> {
      const seen = await outcomeOf(c, stream);
      const got = kind === 'http2' ? seen.replace(NODE_LEAVES_OPEN, '') : seen;
      const dev = deviation(kind, what);
      if (dev) assert.equal(got, dev.observed, `${what}: node:http2's recorded deviation (${dev.why}); RFC 9113: ${rfc.join(' or ')}`);
      else assert.ok(rfc.includes(got), `${what}: got "${got}", RFC 9113 wants ${rfc.map((x) => `"${x}"`).join(' or ')}`);
    }

    /** A connection error of type `code` (RFC 9113 §5.4.1): GOAWAY with that code, then the close. */
    const connectionError = (c: FrameClient, code: number, what: string) => expectOutcome(c, 0, what, [`GOAWAY ${errorName(code)}`]);
    /** A stream error of type `code` on `stream` (§5.4.2): RST_STREAM with that code, the connection lives on. */
    const streamError = (c: FrameClient, stream: number, code: number, what: string) => expectOutcome(c, stream, what, [`RST_STREAM ${errorName(code)}`]);
    /** A stream or a connection error of type `code` (where the RFC lets the endpoint choose). */
    const eitherError = (c: FrameClient, stream: number, code: number, what: string) => expectOutcome(c, stream, what, [`RST_STREAM ${errorName(code)}`, `GOAWAY ${errorName(code)}`]);

    it('§3.4: a bad connection preface is a connection error (PROTOCOL_ERROR)', async () => {
      const c = await open([], false);
      c.send(Buffer.from('PRI * HTTP/1.1\r\n\r\nSM\r\n\r\n', 'latin1'), settingsFrame());
      // §3.4: "MUST be treated as a connection error (PROTOCOL_ERROR)"; a GOAWAY is optional after an invalid preface.
      await expectOutcome(c, 0, 'a bad preface', ['GOAWAY PROTOCOL_ERROR', 'closed without GOAWAY']);
    });

    it('§3.4, §6.5.3: the server sends SETTINGS first and acknowledges the client\'s SETTINGS', async () => {
      const c = await open([], false);
      c.send(PREFACE, settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 100_000]]));
      const first = await c.next();
      assert.ok(typeof first !== 'string', `a first frame: ${String(first)}`);
      assert.deepEqual([first.type, first.flags & ACK, first.stream], [FrameType.SETTINGS, 0, 0], 'the server preface is a SETTINGS frame');
      assert.equal(first.payload.length % 6, 0);
      const ack = await c.nextOf((f) => f.type === FrameType.SETTINGS && (f.flags & ACK) !== 0);
      assert.ok(typeof ack !== 'string', `SETTINGS ACK: ${String(ack)}`);
      assert.equal(ack.payload.length, 0, 'an ACK has no payload');
      const maxStreams = settingsOf(first).get(Setting.MAX_CONCURRENT_STREAMS);
      assert.equal(maxStreams, MAX_CONCURRENT, 'SETTINGS_MAX_CONCURRENT_STREAMS is the configured one');
    });

    it('§6.5: SETTINGS whose length is not a multiple of 6 is a connection error (FRAME_SIZE_ERROR)', async () => {
      const c = await open();
      c.send(frameBytes(FrameType.SETTINGS, 0, 0, Buffer.from([0, Setting.ENABLE_PUSH, 0, 0, 0])));
      await connectionError(c, ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS of 5 bytes');
    });

    it('§6.5: SETTINGS with ACK and a payload is a connection error (FRAME_SIZE_ERROR)', async () => {
      const c = await open();
      c.send(frameBytes(FrameType.SETTINGS, ACK, 0, Buffer.from([0, Setting.ENABLE_PUSH, 0, 0, 0, 0])));
      await connectionError(c, ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS ACK with 6 bytes');
    });

    it('§6.5: SETTINGS on a stream other than 0 is a connection error (PROTOCOL_ERROR)', async () => {
      const c = await open();
      c.send(frameBytes(FrameType.SETTINGS, 0, 1));
      await connectionError(c, ErrorCode.PROTOCOL_ERROR, 'SETTINGS on stream 1');
    });

    it('§6.5.2: SETTINGS_ENABLE_PUSH 2 and SETTINGS_MAX_FRAME_SIZE below 16384 are PROTOCOL_ERROR; INITIAL_WINDOW_SIZE above 2^31-1 is FLOW_CONTROL_ERROR', async () => {
      const push = await open();
      push.send(settingsFrame([[Setting.ENABLE_PUSH, 2]]));
      await connectionError(push, ErrorCode.PROTOCOL_ERROR, 'ENABLE_PUSH 2');
      const size = await open();
      size.send(settingsFrame([[Setting.MAX_FRAME_SIZE, 16_383]]));
      await connectionError(size, ErrorCode.PROTOCOL_ERROR, 'MAX_FRAME_SIZE 16383');
      const win = await open();
      win.send(settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 2 ** 31]]));
      await connectionError(win, ErrorCode.FLOW_CONTROL_ERROR, 'INITIAL_WINDOW_SIZE 2^31');
    });

    it('§5.5, §6.5.2: frames of an unknown type and settings of an unknown identifier are ignored', async () => {
      const c = await open();
      c.send(frameBytes(0xfa, 0xff, 0, Buffer.from('extension')), frameBytes(0x3c, 0, 1, Buffer.alloc(40)), settingsFrame([[0x7f7f, 1]]));
      assert.ok(await c.ping(), 'the connection answers PING after them');
      c.send(healthCheck(1));
      assertServing(await c.streamEnd(1), 'a call after them');
    });

    it('§6.7: PING is answered by a PING with ACK and the same 8 bytes; other lengths are FRAME_SIZE_ERROR, a stream id is PROTOCOL_ERROR', async () => {
      const c = await open();
      const data = Buffer.from([1, 2, 3, 4, 5, 6, 7, 0xff]);
      c.send(pingFrame(data));
      const ack = await c.nextOf((f) => f.type === FrameType.PING);
      assert.ok(typeof ack !== 'string', String(ack));
      assert.deepEqual([ack.flags, ack.stream, [...ack.payload]], [ACK, 0, [...data]]);
      c.send(pingFrame(Buffer.alloc(7)));
      await connectionError(c, ErrorCode.FRAME_SIZE_ERROR, 'PING of 7 bytes');
      const s = await open();
      s.send(frameBytes(FrameType.PING, 0, 1, Buffer.alloc(8)));
      await connectionError(s, ErrorCode.PROTOCOL_ERROR, 'PING on stream 1');
    });

    it('§6.7: an unsolicited PING ACK from the client is not answered (the RFC gives it no meaning); the connection goes on', async () => {
      const c = await open();
      c.send(pingFrame(Buffer.alloc(8), ACK));
      await expectOutcome(c, 0, 'an unsolicited PING ACK', ['ignored']);
    });

    it('§6.1, §6.2: DATA and HEADERS on stream 0 are connection errors (PROTOCOL_ERROR)', async () => {
      const d = await open();
      d.send(dataFrame(0, Buffer.from('x'), END_STREAM));
      await connectionError(d, ErrorCode.PROTOCOL_ERROR, 'DATA on stream 0');
      const h = await open();
      h.send(grpcHeaders(0, HEALTH_CHECK_PATH, { end: true }));
      await connectionError(h, ErrorCode.PROTOCOL_ERROR, 'HEADERS on stream 0');
    });

    it('§5.1.1: a client stream with an even id, or a lower id than one already opened, is a connection error (PROTOCOL_ERROR)', async () => {
      const even = await open();
      even.send(grpcHeaders(2, HEALTH_CHECK_PATH, { end: true }));
      await connectionError(even, ErrorCode.PROTOCOL_ERROR, 'stream 2 from the client');
      const lower = await open();
      lower.send(healthCheck(5));
      assertServing(await lower.streamEnd(5), 'stream 5');
      lower.send(healthCheck(3));
      await connectionError(lower, ErrorCode.PROTOCOL_ERROR, 'stream 3 after 5');
    });

    it('§5.1: HEADERS or DATA on a stream the client closed (END_STREAM sent, answer received) is STREAM_CLOSED', async () => {
      const c = await open();
      c.send(healthCheck(1));
      assertServing(await c.streamEnd(1), 'stream 1');
      c.send(dataFrame(1, Buffer.from('late')));
      await eitherError(c, 1, ErrorCode.STREAM_CLOSED, 'DATA on closed stream 1');
      const h = await open();
      h.send(healthCheck(1));
      assertServing(await h.streamEnd(1), 'stream 1');
      h.send(grpcHeaders(1, HEALTH_CHECK_PATH, { end: true }));
      await eitherError(h, 1, ErrorCode.STREAM_CLOSED, 'HEADERS on closed stream 1');
    });

    it('§5.1: DATA on a half-closed (remote) stream is a stream error (STREAM_CLOSED)', async () => {
      const c = await open();
      // The request ends at once; the call then waits for its (absent) token review, so the stream stays half-closed (remote).
      c.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH), dataFrame(1, grpcMessage(requestBytes({ csr: 'x' })), END_STREAM), dataFrame(1, Buffer.from('more')));
      await eitherError(c, 1, ErrorCode.STREAM_CLOSED, 'DATA after END_STREAM');
    });

    it('§6.4, §6.9: RST_STREAM or WINDOW_UPDATE on an idle stream is a connection error (PROTOCOL_ERROR)', async () => {
      const r = await open();
      r.send(rstStreamFrame(7, ErrorCode.CANCEL));
      await connectionError(r, ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on idle stream 7');
      const w = await open();
      w.send(windowUpdateFrame(7, 100));
      await connectionError(w, ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE on idle stream 7');
    });

    it('§6.10: CONTINUATION without a HEADERS before it is a connection error (PROTOCOL_ERROR)', async () => {
      const c = await open();
      c.send(continuationFrame(1, literalBlock([['x-a', 'b']])));
      await connectionError(c, ErrorCode.PROTOCOL_ERROR, 'CONTINUATION first');
      const after = await open();
      after.send(healthCheck(1));
      assertServing(await after.streamEnd(1), 'stream 1');
      after.send(continuationFrame(1, literalBlock([['x-a', 'b']])));
      await connectionError(after, ErrorCode.PROTOCOL_ERROR, 'CONTINUATION after a finished header block');
    });

    it('§6.10, §4.3: any frame but CONTINUATION of the same stream inside a header block is a connection error (PROTOCOL_ERROR)', async () => {
      const fields = literalBlock(grpcRequestFields(HEALTH_CHECK_PATH));
      const head = fields.subarray(0, 20);
      const tail = fields.subarray(20);
      const ping = await open();
      ping.send(headersFrame(1, head, END_STREAM), pingFrame(Buffer.alloc(8)), continuationFrame(1, tail));
      await connectionError(ping, ErrorCode.PROTOCOL_ERROR, 'PING inside the block');
      const other = await open();
      other.send(headersFrame(1, head, END_STREAM), continuationFrame(3, tail));
      await connectionError(other, ErrorCode.PROTOCOL_ERROR, 'CONTINUATION of stream 3 inside stream 1\'s block');
      const data = await open();
      data.send(headersFrame(1, head, 0), dataFrame(1, grpcMessage(Buffer.alloc(0)), END_STREAM));
      await connectionError(data, ErrorCode.PROTOCOL_ERROR, 'DATA of the same stream inside its block');
      const split = await open();
      split.send(headersFrame(1, head, 0), continuationFrame(1, tail.subarray(0, 5), 0), continuationFrame(1, tail.subarray(5)), dataFrame(1, grpcMessage(Buffer.alloc(0)), END_STREAM));
      assertServing(await split.streamEnd(1), 'a block split over HEADERS and two CONTINUATIONs is one request');
    });

    it('§4.2: a frame over SETTINGS_MAX_FRAME_SIZE (16384) is FRAME_SIZE_ERROR: a HEADERS as a connection error, a DATA at least as a stream error', async () => {
      const h = await open();
      h.send(headersFrame(1, Buffer.concat([literalBlock(grpcRequestFields(HEALTH_CHECK_PATH)), literalBlock([['x-pad', 'p'.repeat(16_384)]])]), END_HEADERS | END_STREAM));
      await connectionError(h, ErrorCode.FRAME_SIZE_ERROR, 'HEADERS of more than 16384 bytes');
      const d = await open();
      d.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH), dataFrame(1, Buffer.alloc(16_385)));
      await eitherError(d, 1, ErrorCode.FRAME_SIZE_ERROR, 'DATA of 16385 bytes');
    });

    it('§6.9: WINDOW_UPDATE with increment 0 is a stream error on a stream, a connection error on stream 0 (PROTOCOL_ERROR)', async () => {
      const s = await open();
      s.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH), windowUpdateFrame(1, 0));
      await streamError(s, 1, ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE 0 on stream 1');
      const c = await open();
      c.send(windowUpdateFrame(0, 0));
      await connectionError(c, ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE 0 on the connection');
    });

    it('§6.9.1: a window beyond 2^31-1 is FLOW_CONTROL_ERROR (stream error on a stream, connection error on the connection)', async () => {
      const s = await open();
      s.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH), windowUpdateFrame(1, 2 ** 31 - 1));
      await streamError(s, 1, ErrorCode.FLOW_CONTROL_ERROR, 'stream window 65535 + 2^31-1');
      const c = await open();
      c.send(windowUpdateFrame(0, 2 ** 31 - 1));
      await connectionError(c, ErrorCode.FLOW_CONTROL_ERROR, 'connection window 65535 + 2^31-1');
    });

    it('§6.9.1: DATA beyond the window the server advertised is FLOW_CONTROL_ERROR, unless the server had replenished it', async (ctx) => {
      const c = await open();
      const window = c.serverSettings.get(Setting.INITIAL_WINDOW_SIZE) ?? 65_535;
      assert.equal(window, 65_535, 'the default window (the CA sets none)');
      // One write of 16384 bytes more than the stream's window (and the connection's 65535), in frames of 16384.
      const body = Buffer.alloc(window + 16_384);
      body.writeUInt32BE(200_000, 1);
      const frames = [];
      for (let at = 0; at < body.length; at += 16_384) frames.push(dataFrame(1, body.subarray(at, at + 16_384)));
      c.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH), ...frames);
      const before: Frame[] = [];
      const end = await c.nextOf((x) => (x.stream === 1 && x.type === FrameType.RST_STREAM) || x.type === FrameType.GOAWAY, undefined, before);
      // A server that reads as the bytes arrive and sends WINDOW_UPDATE at once has, by its own
      // count, never seen the window passed (it cannot know what the client had received): then
      // no error is due, and only the connection's health is checked.
      const updates = before.filter((x) => x.type === FrameType.WINDOW_UPDATE).length;
      const got = typeof end === 'string' ? ((await c.ping()) ? 'ignored' : 'no answer') : `${end.type === FrameType.GOAWAY ? 'GOAWAY' : 'RST_STREAM'} ${errorName(end.payload.readUInt32BE(end.type === FrameType.GOAWAY ? 4 : 0))}`;
      ctx.diagnostic(`${kind}: ${body.length} bytes against a window of ${window}: ${got}, ${updates} WINDOW_UPDATEs from the server before it`);
      if (got === 'ignored' && updates > 0) return;
      const dev = deviation(kind, 'DATA beyond the stream window');
      if (dev) assert.equal(got, dev.observed, dev.why);
      else assert.ok(['RST_STREAM FLOW_CONTROL_ERROR', 'GOAWAY FLOW_CONTROL_ERROR'].includes(got), `${got} with no WINDOW_UPDATE sent`);
    });

    it('§6.9.1: DATA in separate TCP writes, each after the WINDOW_UPDATEs it needs: the server gives back no more than it received and never refuses what it advertised plus what it gave back', async (ctx) => {
      const c = await open();
      const streamWindow = c.serverSettings.get(Setting.INITIAL_WINDOW_SIZE) ?? 65_535;
      // The connection's window as the client sees it: 65,535, then every WINDOW_UPDATE on 0.
      let connAllowed = 65_535;
      let streamAllowed = streamWindow;
      let streamCredit = 0;
      let connCredit = 0;
      const count = (frames: readonly Frame[]) => {
        for (const f of frames) {
          if (f.type !== FrameType.WINDOW_UPDATE) continue;
          const n = f.payload.readUInt32BE(0) & 0x7fff_ffff;
          if (f.stream === 0) (connAllowed += n), (connCredit += n);
          if (f.stream === 1) (streamAllowed += n), (streamCredit += n);
        }
      };
      // 160 KB of one CreateCertificate message (under the CA's 256 KiB), in frames of 16,384, one write each.
      const body = grpcMessage(Buffer.alloc(160_000 - 5));
      c.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH));
      let sent = 0;
      for (let at = 0; at < body.length; at += 16_384) {
        const part = body.subarray(at, at + 16_384);
        // Before the first frame, and whenever the windows as the client sees them do not allow the
        // next one: a PING round trip, so every WINDOW_UPDATE for what was sent is in.
        if (at === 0 || part.length > Math.min(connAllowed, streamAllowed)) {
          const seen = await framesUntilPingAck(c, `fc${String(at).padStart(6, '0')}`);
          assert.ok(seen, `the connection answers a PING (at ${at})`);
          count(seen);
          assert.ok(!seen.some((f) => f.type === FrameType.GOAWAY || (f.type === FrameType.RST_STREAM && f.stream === 1)), `no error for DATA within the window (at ${at})`);
        }
        assert.ok(part.length <= Math.min(connAllowed, streamAllowed), `window for the frame at ${at}: connection ${connAllowed}, stream ${streamAllowed}`);
        c.send(dataFrame(1, part, at + 16_384 >= body.length ? END_STREAM : 0));
        sent += part.length;
        connAllowed -= part.length;
        streamAllowed -= part.length;
      }
      const end = await c.streamEnd(1);
      ctx.diagnostic(`${kind}: ${sent} bytes in ${Math.ceil(sent / 16_384)} writes; WINDOW_UPDATE credit: connection ${connCredit}, stream ${streamCredit}`);
      assert.equal(end.how, 'ended', `the call is answered: ${describeEnd(end)}`);
      assert.ok(streamCredit <= sent && streamCredit >= sent - streamWindow, `the stream's credit (${streamCredit}) is at most what was sent (${sent}) and lags it by under a window`);
      assert.ok(connCredit <= sent + (1 << 20), `the connection's credit (${connCredit}) is its first window plus at most what was sent`);
    });

    it('§6.1, §6.2: padding as long as the payload or longer is a connection error (PROTOCOL_ERROR)', async () => {
      const d = await open();
      d.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH), frameBytes(FrameType.DATA, PADDED, 1, Buffer.from([10, 1, 2, 3])));
      await connectionError(d, ErrorCode.PROTOCOL_ERROR, 'DATA: pad length 10 in 4 bytes');
      const h = await open();
      const block = literalBlock(grpcRequestFields(HEALTH_CHECK_PATH));
      h.send(frameBytes(FrameType.HEADERS, PADDED | END_HEADERS | END_STREAM, 1, Buffer.concat([Buffer.from([block.length + 1]), block])));
      await connectionError(h, ErrorCode.PROTOCOL_ERROR, 'HEADERS: pad length beyond the payload');
      const ok = await open();
      ok.send(frameBytes(FrameType.HEADERS, PADDED | END_HEADERS, 1, Buffer.concat([Buffer.from([3]), block, Buffer.alloc(3)])));
      ok.send(frameBytes(FrameType.DATA, PADDED | END_STREAM, 1, Buffer.concat([Buffer.from([4]), grpcMessage(Buffer.alloc(0)), Buffer.alloc(4)])));
      assertServing(await ok.streamEnd(1), 'padded HEADERS and DATA within bounds are a normal request');
    });

    describe('§8.2, §8.3: a malformed request is a stream error (PROTOCOL_ERROR), the connection lives on', () => {
      const malformed: ReadonlyArray<readonly [string, ReadonlyArray<readonly [string, string]>]> = [
        ['§8.2.1 an uppercase field name', [...grpcRequestFields(HEALTH_CHECK_PATH), ['X-Upper', 'a']]],
        ['§8.2.2 a connection-specific field (connection)', [...grpcRequestFields(HEALTH_CHECK_PATH), ['connection', 'keep-alive']]],
        ['§8.2.2 a connection-specific field (transfer-encoding)', [...grpcRequestFields(HEALTH_CHECK_PATH), ['transfer-encoding', 'chunked']]],
        ['§8.2.2 te other than trailers', grpcRequestFields(HEALTH_CHECK_PATH).map(([k, v]) => [k, k === 'te' ? 'gzip' : v] as const)],
        ['§8.3.1 no :path', grpcRequestFields(HEALTH_CHECK_PATH).filter(([k]) => k !== ':path')],
        ['§8.3.1 no :method', grpcRequestFields(HEALTH_CHECK_PATH).filter(([k]) => k !== ':method')],
        ['§8.3.1 no :scheme', grpcRequestFields(HEALTH_CHECK_PATH).filter(([k]) => k !== ':scheme')],
        ['§8.3.1 an empty :path', grpcRequestFields(HEALTH_CHECK_PATH).map(([k, v]) => [k, k === ':path' ? '' : v] as const)],
        ['§8.3 a duplicate pseudo-header (:path twice)', [[':path', HEALTH_CHECK_PATH], ...grpcRequestFields(HEALTH_CHECK_PATH)]],
        ['§8.3 a pseudo-header after a regular field', [...grpcRequestFields(HEALTH_CHECK_PATH).filter(([k]) => k !== ':authority'), [':authority', 'localhost']]],
        ['§8.3 an unknown pseudo-header', [[':protocol-x', 'a'], ...grpcRequestFields(HEALTH_CHECK_PATH)]],
        ['§8.3.2 a response pseudo-header (:status) in a request', [[':status', '200'], ...grpcRequestFields(HEALTH_CHECK_PATH)]],
      ];
      for (const [name, fields] of malformed) {
        it(name, async () => {
          const c = await open();
          c.send(headersFrame(1, literalBlock(fields), END_HEADERS | END_STREAM));
          await streamError(c, 1, ErrorCode.PROTOCOL_ERROR, name);
          c.send(healthCheck(3));
          assertServing(await c.streamEnd(3), `${name}: the next stream is served`);
        });
      }
    });

    it('§4.3: a header block that does not decode (HPACK index 0, index beyond the tables, truncated literal) is a connection error (COMPRESSION_ERROR)', async () => {
      const blocks: ReadonlyArray<readonly [string, Buffer]> = [
        ['indexed field 0', Buffer.from([0x80])],
        ['index 100 with an empty dynamic table', Buffer.concat([literalBlock(grpcRequestFields(HEALTH_CHECK_PATH)), Buffer.from([0x80 | 100])])],
        ['a literal whose length runs past the block', Buffer.concat([literalBlock(grpcRequestFields(HEALTH_CHECK_PATH)), Buffer.from([0x00, 0x05, 0x61])])],
      ];
      for (const [what, block] of blocks) {
        const c = await open();
        c.send(headersFrame(1, block, END_HEADERS | END_STREAM));
        await connectionError(c, ErrorCode.COMPRESSION_ERROR, what);
      }
    });

    it(`§5.1.2: a stream beyond SETTINGS_MAX_CONCURRENT_STREAMS (${MAX_CONCURRENT}) is refused (RST_STREAM REFUSED_STREAM), the others go on`, async () => {
      const c = await open();
      const held: Buffer[] = [];
      for (let i = 0; i < MAX_CONCURRENT; i++) held.push(grpcHeaders(2 * i + 1, CREATE_CERTIFICATE_PATH));
      c.send(...held, grpcHeaders(2 * MAX_CONCURRENT + 1, CREATE_CERTIFICATE_PATH));
      const what = `stream ${MAX_CONCURRENT + 1} of ${MAX_CONCURRENT}`;
      await streamError(c, 2 * MAX_CONCURRENT + 1, ErrorCode.REFUSED_STREAM, what);
      if (deviation(kind, what)) return stillServing(what);
      c.send(rstStreamFrame(1, ErrorCode.CANCEL));
      c.send(healthCheck(2 * MAX_CONCURRENT + 3));
      assertServing(await c.streamEnd(2 * MAX_CONCURRENT + 3), 'once one closed, a new stream is served');
    });

    it(`CA_MAX_STREAMS (${MAX_STREAMS} across connections): a stream beyond it gets RESOURCE_EXHAUSTED at once, with ${RETRY_PUSHBACK_METADATA} (docs/security.md)`, async () => {
      const a = await open();
      const b = await open();
      const half = MAX_STREAMS / 2;
      for (const c of [a, b]) c.send(...Array.from({ length: half }, (_, i) => grpcHeaders(2 * i + 1, CREATE_CERTIFICATE_PATH)));
      assert.ok((await a.ping()) && (await b.ping()), `${MAX_STREAMS} streams held open`);
      b.send(grpcHeaders(2 * half + 1, CREATE_CERTIFICATE_PATH));
      const over = await b.streamEnd(2 * half + 1);
      assert.equal(describeEnd(over), 'ended (status 200, grpc-status 8)', 'RESOURCE_EXHAUSTED, trailers-only');
      assert.match(over.fields[RETRY_PUSHBACK_METADATA] ?? '', /^\d+$/u, 'a retry pushback in ms');
      a.close();
      b.close();
      await stillServing('after the cap');
    });

    it('§6.9.2: with the client\'s SETTINGS_INITIAL_WINDOW_SIZE 16 the server sends at most 16 bytes of DATA, then resumes on WINDOW_UPDATE', async () => {
      const c = await open([[Setting.INITIAL_WINDOW_SIZE, 16]]);
      c.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH, { extra: [['authorization', `Bearer ${t.ztunnel}`]] }), dataFrame(1, grpcMessage(requestBytes({ csr: await t.csr() })), END_STREAM));
      const seen: Frame[] = [];
      const head: Frame[] = [];
      let data = 0;
      while (data < 16) {
        const f = await c.nextOf((x) => x.stream === 1 && (x.type === FrameType.DATA || x.type === FrameType.RST_STREAM || (x.flags & END_STREAM) !== 0), undefined, head);
        assert.ok(typeof f !== 'string', `DATA on stream 1: ${String(f)}`);
        assert.notEqual(f.type, FrameType.RST_STREAM, 'not reset');
        assert.equal(f.flags & END_STREAM, 0, 'the answer is longer than 16 bytes: it cannot end yet');
        seen.push(f);
        data += f.payload.length;
      }
      assert.equal(data, 16, 'exactly the window, in DATA frames');
      // A PING's ACK comes after anything the server had queued: no more DATA before it.
      c.send(pingFrame(Buffer.from('window16')));
      const between: Frame[] = [];
      const pong = await c.nextOf((x) => x.type === FrameType.PING && (x.flags & ACK) !== 0, undefined, between);
      assert.ok(typeof pong !== 'string', String(pong));
      assert.deepEqual(between.filter((x) => x.stream === 1 && x.type === FrameType.DATA), [], 'no DATA beyond the window');
      c.send(windowUpdateFrame(1, 1 << 20));
      const rest = await c.streamEnd(1);
      assert.equal(head.find((x) => x.stream === 1 && x.type === FrameType.HEADERS)?.fields?.[0]?.join(' '), ':status 200', 'response headers before the DATA');
      assert.equal(describeEnd(rest), 'ended (status ?, grpc-status 0)', 'the answer completes (trailers) after WINDOW_UPDATE');
      const body = Buffer.concat([...seen.map((f) => f.payload), rest.body]);
      assert.equal(body.readUInt32BE(1), body.length - 5, 'one whole gRPC message');
      const chain = (Response.toObject(Response.decode(body.subarray(5))) as { cert_chain: string[] }).cert_chain;
      assert.equal(checkX509Svid(chain[0]!)?.id, 'spiffe://cluster.local/ns/istio-system/sa/ztunnel');
    });

    it('§6.8: after the client\'s GOAWAY a call already sent is still answered; the server stays up', async () => {
      const c = await open();
      c.send(healthCheck(1), goawayFrame(0, ErrorCode.NO_ERROR));
      assertServing(await c.streamEnd(1), 'stream 1 sent before GOAWAY');
      c.close();
      await stillServing('after a client GOAWAY');
    });

    it('§6.4: RST_STREAM from the client mid-call ends that stream only; the connection serves the next call', async () => {
      const c = await open();
      c.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH, { extra: [['authorization', `Bearer ${t.ztunnel}`]] }), dataFrame(1, Buffer.from([0, 0, 0, 1, 0])));
      c.send(rstStreamFrame(1, ErrorCode.CANCEL), healthCheck(3));
      const skipped: Frame[] = [];
      const o = await c.streamEnd(3);
      assertServing(o, 'stream 3 after stream 1 was reset');
      skipped.push(...o.frames);
      assert.ok(await c.ping(), 'the connection lives');
      assert.equal(c.problem, undefined);
    });

    it('a full gRPC CreateCertificate in raw frames: 200, application/grpc, one IstioCertificateResponse whose leaf is the caller\'s SVID, grpc-status 0', async () => {
      const c = await open();
      const csr = await t.csr();
      c.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH, { extra: [['authorization', `Bearer ${t.ztunnel}`], ['grpc-timeout', '20S']] }), dataFrame(1, grpcMessage(requestBytes({ csr, validity_duration: 3600 })), END_STREAM));
      const o = await c.streamEnd(1);
      assert.equal(describeEnd(o), 'ended (status 200, grpc-status 0)', JSON.stringify(o.fields));
      assert.equal(o.fields['content-type'], 'application/grpc');
      const heads = o.frames.filter((f) => f.type === FrameType.HEADERS);
      assert.equal(heads.length, 2, 'response headers, then trailers');
      assert.equal(heads[0]!.fields?.[0]?.[0], ':status', 'pseudo-header first');
      assert.ok(!heads[1]!.fields?.some(([k]) => k.startsWith(':')), 'no pseudo-header in trailers');
      assert.equal(o.body[0], 0, 'uncompressed');
      assert.equal(o.body.readUInt32BE(1), o.body.length - 5, 'exactly one message');
      const chain = (Response.toObject(Response.decode(o.body.subarray(5))) as { cert_chain: string[] }).cert_chain;
      assert.ok(chain.length >= 2, 'leaf and root');
      assert.equal(checkX509Svid(chain[0]!)?.id, 'spiffe://cluster.local/ns/istio-system/sa/ztunnel');
      assert.equal(chain.at(-1), t.rootsPem);
      // Same connection, a refused one (no token): a gRPC status, not an HTTP error.
      c.send(grpcHeaders(3, CREATE_CERTIFICATE_PATH), dataFrame(3, grpcMessage(requestBytes({ csr })), END_STREAM));
      const denied = await c.streamEnd(3);
      assert.equal(describeEnd(denied), 'ended (status 200, grpc-status 16)', 'UNAUTHENTICATED without a token');
      assert.equal(c.problem, undefined);
    });

    it('a health Check in raw frames: SERVING; an unknown service NOT_FOUND; both on one connection', async () => {
      const c = await open();
      c.send(healthCheck(1));
      assertServing(await c.streamEnd(1), 'whole server');
      const nope = Buffer.from([0x0a, 4, ...Buffer.from('nope')]);
      c.send(grpcHeaders(3, HEALTH_CHECK_PATH), dataFrame(3, grpcMessage(nope), END_STREAM));
      assert.equal(describeEnd(await c.streamEnd(3)), 'ended (status 200, grpc-status 5)');
      assert.equal(c.problem, undefined);
    });

    describe('DoS guards', () => {
      it('rapid reset (CVE-2023-44487): streams opened and reset at once end in GOAWAY ENHANCE_YOUR_CALM or a close, and the server serves others', async (ctx) => {
        const c = await open();
        const total = 20_000;
        let sent = 0;
        for (let id = 1; sent < total && !c.closed && !c.saw(FrameType.GOAWAY); ) {
          const batch: Buffer[] = [];
          for (let i = 0; i < 100; i++, id += 2, sent++) batch.push(grpcHeaders(id, CREATE_CERTIFICATE_PATH), rstStreamFrame(id, ErrorCode.CANCEL));
          if (!(await c.sendAndDrain(Buffer.concat(batch)))) break;
        }
        const g = await c.goaway();
        ctx.diagnostic(`${kind}: ${sent} streams opened and reset before the server reacted: ${g.code === undefined ? 'closed' : `GOAWAY ${errorName(g.code)}`}`);
        assert.ok(sent < total, `the server reacted before ${total} resets`);
        const how = g.code === undefined ? (g.closed ? 'closed without GOAWAY' : 'still open') : `GOAWAY ${errorName(g.code)}`;
        const dev = deviation(kind, 'rapid reset');
        if (dev) assert.equal(how, dev.observed, dev.why);
        else assert.ok(['GOAWAY ENHANCE_YOUR_CALM', 'closed without GOAWAY'].includes(how), how);
        await stillServing('after a rapid reset flood');
      });

      it('CONTINUATION flood (CVE-2024-27983 kind): a header block that never ends is a connection error before 8 MiB, the server serves others', async (ctx) => {
        const c = await open();
        c.send(headersFrame(1, literalBlock(grpcRequestFields(HEALTH_CHECK_PATH)), END_STREAM));
        const filler = continuationFrame(1, literalBlock([['x-flood', 'f'.repeat(16_000)]]), 0);
        const limit = 8 << 20;
        let sent = 0;
        while (sent < limit && !c.closed && !c.saw(FrameType.GOAWAY) && (await c.sendAndDrain(filler))) sent += filler.length;
        const g = await c.goaway();
        ctx.diagnostic(`${kind}: ${sent} bytes of CONTINUATION sent before the server reacted: ${g.code === undefined ? 'closed' : `GOAWAY ${errorName(g.code)}`}`);
        assert.ok(sent < limit, `the server ended the connection before ${limit} bytes of one header block`);
        assert.ok(g.closed, 'the connection is closed');
        if (g.code !== undefined) assert.notEqual(g.code, ErrorCode.NO_ERROR, 'an error code');
        await stillServing('after a CONTINUATION flood');
      });

      for (const [name, frameOf] of [
        ['PING', (i: number) => pingFrame(Buffer.from(`p${String(i).padStart(7, '0')}`))],
        ['SETTINGS', () => settingsFrame([[Setting.INITIAL_WINDOW_SIZE, 65_535]])],
      ] as const) {
        it(`${name} flood while not reading: every one acknowledged, or GOAWAY ENHANCE_YOUR_CALM / a close; the server serves others`, async (ctx) => {
          const c = await open();
          const total = 100_000;
          c.socket.pause();
          let sent = 0;
          while (sent < total && !c.closed) {
            const batch = Buffer.concat(Array.from({ length: 1000 }, (_, i) => frameOf(sent + i)));
            sent += 1000;
            // Backpressure with a reader that does not read: stop when the socket stops taking bytes for a while.
            const took = await Promise.race([c.sendAndDrain(batch), new Promise<false>((r) => setTimeout(() => r(false), 2000))]);
            if (!took) break;
          }
          c.socket.resume();
          const acks = { n: 0 };
          const end = await c.nextOf((f) => {
            if (f.type === frameTypeOf(name) && (f.flags & ACK) !== 0) acks.n++;
            return f.type === FrameType.GOAWAY || acks.n === sent;
          }, 60_000);
          const how = typeof end === 'string' ? end : end.type === FrameType.GOAWAY ? `GOAWAY ${errorName(end.payload.readUInt32BE(4))}` : 'all acknowledged';
          ctx.diagnostic(`${kind}: ${sent} ${name} frames sent (socket paused), ${acks.n} acknowledged: ${how}`);
          assert.ok(['all acknowledged', 'GOAWAY ENHANCE_YOUR_CALM', 'closed'].includes(how), how);
          await stillServing(`after a ${name} flood`);
        });
      }

      it('empty DATA flood (CVE-2019-9518 kind): zero-length DATA frames without END_STREAM end in a connection error or a close; the server serves others', async (ctx) => {
        const c = await open();
        c.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH));
        const total = 200_000;
        let sent = 0;
        const batch = Buffer.concat(Array.from({ length: 1000 }, () => dataFrame(1, Buffer.alloc(0))));
        while (sent < total && !c.closed && !c.saw(FrameType.GOAWAY) && (await c.sendAndDrain(batch))) sent += 1000;
        const g = await c.goaway();
        ctx.diagnostic(`${kind}: ${sent} empty DATA frames sent: ${g.code === undefined ? (g.closed ? 'closed' : 'still open') : `GOAWAY ${errorName(g.code)}`}`);
        assert.ok(sent < total, `the server reacted before ${total} empty frames`);
        assert.ok(g.closed, 'the connection is closed');
        await stillServing('after an empty DATA flood');
      });
    });

  });

  /**
   * The cases that wait for the server's own timers, on a CA of their own with short ones: the
   * SETTINGS acknowledgement (§6.5.3) and the graceful close the idle timeout starts (§6.8).
   */
  describe(`HTTP/2 conformance (RFC 9113) of the CA's '${kind}' transport: SETTINGS timeout and graceful close`, () => {
    let t: H2Target;
    const clients: FrameClient[] = [];
    before(async () => {
      t = await startTarget(kind, { settingsAckTimeoutMs: SETTINGS_ACK_MS, idleSessionTimeoutMs: IDLE_MS });
    });
    after(async () => {
      for (const c of clients) c.close();
      await t?.close();
    });
    async function connect(): Promise<FrameClient> {
      const c = await FrameClient.connect(t);
      clients.push(c);
      return c;
    }

    it(`§6.5.3: a client that never acknowledges the server's SETTINGS gets GOAWAY SETTINGS_TIMEOUT after the bound (${SETTINGS_ACK_MS} ms here); one that acknowledges late but in time keeps working`, async () => {
      const never = await connect();
      never.send(PREFACE, settingsFrame());
      const g = await never.goaway();
      const got = g.code === undefined ? (g.closed ? 'closed without GOAWAY' : 'ignored') : `GOAWAY ${errorName(g.code)}${g.closed ? '' : NODE_LEAVES_OPEN}`;
      const dev = deviation(kind, 'SETTINGS never acknowledged');
      if (dev) assert.equal(got, dev.observed, dev.why);
      else assert.equal(got, 'GOAWAY SETTINGS_TIMEOUT');

      const late = await connect();
      late.send(PREFACE, settingsFrame());
      assert.ok(typeof (await late.nextOf((f) => f.type === FrameType.SETTINGS && (f.flags & ACK) === 0)) !== 'string', 'the server SETTINGS');
      late.send(healthCheck(1));
      assertServing(await late.streamEnd(1), 'a call before the ACK');
      late.send(settingsFrame([], ACK));
      // Past the bound (a wait, not a measurement: later is as good), still under the idle timeout.
      await new Promise((r) => setTimeout(r, SETTINGS_ACK_MS + 300));
      late.send(healthCheck(3));
      assertServing(await late.streamEnd(3), 'a call after the bound, the ACK having come in time');
      assert.ok(!late.saw(FrameType.GOAWAY), 'no GOAWAY');
    });

    it('§6.8: a graceful close (the idle timeout) sends GOAWAY(2^31-1) and a PING first; streams opened before the PING ACK are answered; the final GOAWAY names the last one; later streams are ignored', async (ctx) => {
      const c = await connect();
      await c.handshake();
      const before: Frame[] = [];
      const first = await c.nextOf((f) => f.type === FrameType.GOAWAY, IDLE_MS + FRAME_WAIT_MS, before);
      assert.ok(typeof first !== 'string', `a GOAWAY after the idle timeout: ${String(first)}`);
      const firstLast = first.payload.readUInt32BE(0) & 0x7fff_ffff;
      const ping = await c.nextOf((f) => f.type === FrameType.PING && (f.flags & ACK) === 0, 2000);
      const shape = `GOAWAY ${errorName(first.payload.readUInt32BE(4))} last ${firstLast === 0x7fff_ffff ? '2^31-1' : firstLast}${typeof ping === 'string' ? ', no PING' : ', PING'}`;
      ctx.diagnostic(`${kind}: ${shape}`);
      const dev = deviation(kind, 'graceful close');
      if (dev) return assert.equal(shape, dev.observed, dev.why);
      assert.equal(shape, 'GOAWAY NO_ERROR last 2^31-1, PING');
      assert.ok(typeof ping !== 'string');
      // Opened "in flight": stream 1 held (no body yet), stream 3 a whole health Check; then the ACK.
      c.send(grpcHeaders(1, CREATE_CERTIFICATE_PATH), healthCheck(3), pingFrame(ping.payload, ACK));
      const seen: Frame[] = [];
      for (let i = 0; i < 50 && !(seen.some((f) => f.stream === 3 && (f.flags & END_STREAM) !== 0) && seen.some((f) => f.type === FrameType.GOAWAY)); i++) {
        const f = await c.next();
        if (typeof f === 'string') break;
        seen.push(f);
      }
      const final = seen.find((f) => f.type === FrameType.GOAWAY);
      assert.ok(final, 'the final GOAWAY');
      assert.deepEqual([final.payload.readUInt32BE(0) & 0x7fff_ffff, final.payload.readUInt32BE(4)], [3, ErrorCode.NO_ERROR], 'the final GOAWAY: last stream 3, NO_ERROR');
      const answer = seen.filter((f) => f.stream === 3);
      assert.ok(answer.some((f) => f.type === FrameType.HEADERS && (f.flags & END_STREAM) !== 0), 'stream 3, opened after the first GOAWAY, is answered');
      // After the final GOAWAY: stream 5 is not processed (ignored, or refused).
      c.send(healthCheck(5));
      const after5 = await framesUntilPingAck(c, 'after-go');
      assert.ok(after5, 'the connection still answers PING while stream 1 is open');
      const on5 = after5.filter((f) => f.stream === 5).map((f) => (f.type === FrameType.RST_STREAM ? `RST_STREAM ${errorName(f.payload.readUInt32BE(0))}` : `type ${f.type}`));
      assert.ok(on5.length === 0 || (on5.length === 1 && on5[0] === 'RST_STREAM REFUSED_STREAM'), `stream 5 after the final GOAWAY: ${on5.join(', ') || 'ignored'}`);
      // Stream 1 still gets its answer (no token: UNAUTHENTICATED), then the connection ends.
      c.send(dataFrame(1, grpcMessage(requestBytes({ csr: await t.csr() })), END_STREAM));
      const o = await c.streamEnd(1);
      assert.equal(describeEnd(o), 'ended (status 200, grpc-status 16)', 'stream 1 is answered after the final GOAWAY');
      assert.equal(await c.drain(CLOSE_WAIT_MS), 'closed', 'the connection ends once its last stream did');
    });
  });
}

/** Sends a PING with the 8-byte `tag` and returns the frames that came before its ACK (undefined: no ACK). */
async function framesUntilPingAck(c: FrameClient, tag: string): Promise<Frame[] | undefined> {
  const data = Buffer.from(tag.padEnd(8, '-').slice(0, 8), 'latin1');
  c.send(pingFrame(data));
  const skipped: Frame[] = [];
  const f = await c.nextOf((x) => x.type === FrameType.PING && (x.flags & ACK) !== 0 && x.payload.equals(data), undefined, skipped);
  return typeof f === 'string' ? undefined : skipped;
}

function frameTypeOf(name: 'PING' | 'SETTINGS'): number {
  return name === 'PING' ? FrameType.PING : FrameType.SETTINGS;
}
