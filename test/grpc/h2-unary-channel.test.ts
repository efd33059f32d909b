/**
 * The lean node:http2 unary client (src/grpc/h2-unary-channel.ts) against a real TLS HTTP/2
 * server on loopback: one kept session, metadata and grpc-timeout on the wire, statuses with
 * percent-encoded messages, a new session after GOAWAY, after the server dropped the connection
 * and after a deadline, cancellation that resets the stream, TLS verified for the given name,
 * and an abandoned handshake.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { constants as h2, createSecureServer, type Http2SecureServer, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { frame, grpcMessage, H2UnaryChannel, type H2UnaryChannelOptions } from '../../src/grpc/index.js';
import { eventually } from '../broker/support/eventually.js';
import { silentTlsMaterial, startHungServer, type TlsMaterial } from '../support/hung-server.js';

/** What a '/t/held' call asks the server for. */
interface HeldAsk {
  readonly size: number;
  readonly split: boolean;
  readonly status: number;
}

interface Seen {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

describe('H2UnaryChannel', () => {
  let material: TlsMaterial;
  let server: Http2SecureServer;
  let port: number;
  const sessions: Http2Session[] = [];
  const seen: Seen[] = [];
  /** rstCode of each '/t/hang' stream once it closed. */
  const hangResets: number[] = [];
  /** Per '/t/held' call whose message is out: sends its held status (trailers). */
  const held: Array<() => void> = [];

  before(async () => {
    material = await silentTlsMaterial();
    server = createSecureServer({ cert: material.certPem, key: material.keyPem, allowHTTP1: false });
    server.on('session', (s) => sessions.push(s));
    server.on('stream', (stream: ServerHttp2Stream, headers) => {
      const path = String(headers[':path']);
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      if (path === '/t/hang') {
        stream.on('close', () => hangResets.push(stream.rstCode));
        return;
      }
      stream.on('end', () => {
        const plain: Record<string, string> = {};
        for (const [k, v] of Object.entries(headers)) if (typeof v === 'string') plain[k] = v;
        seen.push({ path, headers: plain, body: Buffer.concat(chunks) });
        if (path === '/t/status') {
          stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': GrpcStatus.PERMISSION_DENIED, 'grpc-message': grpcMessage('no — 100% not') }, { endStream: true });
          return;
        }
        if (path === '/t/busy') {
          stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': GrpcStatus.RESOURCE_EXHAUSTED, 'grpc-message': 'shed', 'grpc-retry-pushback-ms': '750' }, { endStream: true });
          return;
        }
        if (path === '/t/http') {
          stream.respond({ ':status': 503 }, { endStream: true });
          return;
        }
        if (path === '/t/held') return answerHeld(stream, JSON.parse(Buffer.concat(chunks).subarray(5).toString()) as HeldAsk);
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.once('wantTrailers', () => {
          stream.sendTrailers({ 'grpc-status': '0' });
          if (path === '/t/goaway') stream.session?.close();
          const session = stream.session;
          if (path === '/t/drop') stream.once('close', () => session?.destroy());
        });
        // The request message back, reversed, as the one response message.
        stream.end(frame(Buffer.concat(chunks).subarray(5).reverse()));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  /**
   * '/t/held': one message of `size` bytes, written in two parts a moment apart when `split`
   * (so it spans DATA frames and reads), then the status `status` only once the test releases it.
   */
  function answerHeld(stream: ServerHttp2Stream, ask: HeldAsk): void {
    const framed = frame(Buffer.alloc(ask.size, 0x78));
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.once('wantTrailers', () => held.push(() => stream.closed || stream.sendTrailers({ 'grpc-status': String(ask.status), 'grpc-message': ask.status === 0 ? '' : 'refused after the message' })));
    if (!ask.split) return void stream.end(framed);
    stream.write(framed.subarray(0, 3));
    setTimeout(() => stream.end(framed.subarray(3)), 30);
  }

  after(async () => {
    for (const s of sessions) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  const channel = (over: Partial<H2UnaryChannelOptions> = {}) =>
    new H2UnaryChannel({ address: `127.0.0.1:${port}`, rootsPem: material.caCertPem, serverName: 'localhost', handshakeTimeoutMs: 5000, ...over });
  const call = (ch: H2UnaryChannel, path: string, over: { timeoutMs?: number; signal?: AbortSignal } = {}) =>
    ch.call({ path, metadata: { authorization: 'Bearer t0ken', clusterid: 'Kubernetes' }, message: Buffer.from('abc'), timeoutMs: over.timeoutMs ?? 10_000, signal: over.signal ?? new AbortController().signal });

  it('keeps one session; sends the metadata, te, grpc-timeout and the name as :authority; returns the one message', async () => {
    const ch = channel();
    const before = sessions.length;
    const a = await call(ch, '/t/echo');
    const b = await call(ch, '/t/echo', { timeoutMs: 2500 });
    ch.close();
    assert.deepEqual([a.code, a.message?.toString()], [GrpcStatus.OK, 'cba']);
    assert.equal(b.code, GrpcStatus.OK);
    assert.equal(sessions.length - before, 1, 'one TLS session for both calls');
    const last = seen.at(-1)!;
    assert.equal(last.headers.authorization, 'Bearer t0ken');
    assert.equal(last.headers.clusterid, 'Kubernetes');
    assert.equal(last.headers.te, 'trailers');
    assert.equal(last.headers['content-type'], 'application/grpc');
    assert.equal(last.headers['grpc-timeout'], '2500m');
    assert.equal(last.headers[':authority'], `localhost:${port}`);
    assert.deepEqual(last.body, frame(Buffer.from('abc')));
  });

  it('given a list of addresses, a session that cannot connect sends the next call to the next address', async () => {
    const closed = createSecureServer({ cert: material.certPem, key: material.keyPem });
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve)); // nothing listens there now
    const ch = channel({ address: `127.0.0.1:${deadPort},127.0.0.1:${port}` });
    const first = await call(ch, '/t/echo');
    assert.equal(first.code, GrpcStatus.UNAVAILABLE, first.details);
    const second = await call(ch, '/t/echo');
    ch.close();
    assert.deepEqual([second.code, second.message?.toString()], [GrpcStatus.OK, 'cba']);
    assert.equal(seen.at(-1)!.headers[':authority'], `localhost:${port}`);
  });

  it('a status (trailers-only) comes back with its message percent-decoded; a non-200 HTTP status maps as gRPC says', async () => {
    const ch = channel();
    assert.deepEqual(await call(ch, '/t/status'), { code: GrpcStatus.PERMISSION_DENIED, details: 'no — 100% not' });
    assert.equal((await call(ch, '/t/http')).code, GrpcStatus.UNAVAILABLE);
    // A refusal's retry pushback (gRFC A6) comes back with it.
    assert.deepEqual(await call(ch, '/t/busy'), { code: GrpcStatus.RESOURCE_EXHAUSTED, details: 'shed', retryAfterMs: 750 });
    ch.close();
  });

  it('after the server sent GOAWAY, and after it dropped the connection, the next call opens a new session', async () => {
    const ch = channel();
    const before = sessions.length;
    assert.equal((await call(ch, '/t/goaway')).code, GrpcStatus.OK);
    assert.equal((await call(ch, '/t/drop')).code, GrpcStatus.OK);
    // The server's side is gone; give the client's socket the moment to see the FIN.
    await eventually('the server session gone', () => sessions.at(-1)!.destroyed);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal((await call(ch, '/t/echo')).code, GrpcStatus.OK);
    ch.close();
    assert.equal(sessions.length - before, 3, 'GOAWAY -> a second session, dropped -> a third');
  });

  it('past its deadline a call is DEADLINE_EXCEEDED and its stream reset; the next call uses a new session', async () => {
    const ch = channel();
    assert.equal((await call(ch, '/t/echo')).code, GrpcStatus.OK);
    const before = sessions.length;
    const resets = hangResets.length;
    assert.deepEqual(await call(ch, '/t/hang', { timeoutMs: 50 }), { code: GrpcStatus.DEADLINE_EXCEEDED, details: 'deadline exceeded' });
    assert.equal((await call(ch, '/t/echo')).code, GrpcStatus.OK);
    ch.close();
    assert.equal(sessions.length - before, 1, 'a new session after the deadline');
    await eventually('the hung stream reset', () => hangResets.length > resets);
    assert.equal(hangResets.at(-1), h2.NGHTTP2_CANCEL);
  });

  it('an aborted signal rejects the call with its reason and resets the stream', async () => {
    const ch = channel();
    const ac = new AbortController();
    const resets = hangResets.length;
    const pending = call(ch, '/t/hang', { signal: ac.signal });
    setTimeout(() => ac.abort(new Error('caller left')), 20);
    await assert.rejects(pending, /caller left/);
    await eventually('the hung stream reset', () => hangResets.length > resets);
    assert.equal(hangResets.at(-1), h2.NGHTTP2_CANCEL);
    await assert.rejects(call(ch, '/t/echo', { signal: ac.signal }), /caller left/, 'an already aborted signal');
    ch.close();
  });

  it('TLS is verified: another name or other roots -> UNAVAILABLE naming the failure; nothing reaches the server', async () => {
    const count = seen.length;
    const wrongName = channel({ serverName: 'not-this.example' });
    const r1 = await call(wrongName, '/t/echo');
    wrongName.close();
    assert.equal(r1.code, GrpcStatus.UNAVAILABLE);
    assert.match(r1.details, /connection failed: .*(altnames|Hostname)/u);
    const other = await silentTlsMaterial();
    const wrongRoots = channel({ rootsPem: other.caCertPem });
    const r2 = await call(wrongRoots, '/t/echo');
    wrongRoots.close();
    assert.equal(r2.code, GrpcStatus.UNAVAILABLE);
    assert.match(r2.details, /connection failed: .*(certificate|issuer)/iu);
    assert.equal(seen.length, count);
  });

  it('trustRoots: the next session verifies against the new roots (a CA root rotation), the kept one is retired', async () => {
    const other = await silentTlsMaterial();
    const ch = channel({ rootsPem: other.caCertPem });
    assert.equal((await call(ch, '/t/echo')).code, GrpcStatus.UNAVAILABLE, 'refused under roots the server does not chain to');
    ch.trustRoots(other.caCertPem + material.caCertPem);
    assert.equal((await call(ch, '/t/echo')).code, GrpcStatus.OK, 'served once they include its root');
    ch.trustRoots(other.caCertPem);
    assert.equal((await call(ch, '/t/echo')).code, GrpcStatus.UNAVAILABLE, 'the kept session was retired: a new one, refused again');
    ch.close();
  });

  it('a handshake that never completes is abandoned: UNAVAILABLE; a closed channel refuses calls', async () => {
    const hung = await startHungServer();
    try {
      const ch = channel({ address: hung.address, handshakeTimeoutMs: 100 });
      const r = await call(ch, '/t/echo');
      assert.equal(r.code, GrpcStatus.UNAVAILABLE);
      assert.match(r.details, /TLS handshake did not complete within 100 ms/u);
      ch.close();
      assert.deepEqual(await call(ch, '/t/echo'), { code: GrpcStatus.UNAVAILABLE, details: 'channel closed' });
    } finally {
      await hung.close();
    }
  });

  const heldCall = <T>(ch: H2UnaryChannel, ask: HeldAsk, early: (m: Buffer) => T, signal = new AbortController().signal) =>
    ch.call({ path: '/t/held', metadata: {}, message: Buffer.from(JSON.stringify(ask)), timeoutMs: 10_000, signal, early });

  it('early: the message is read as soon as it is complete, before the status arrives — once, across DATA frames, larger than one frame', async () => {
    const ch = channel();
    for (const ask of [{ size: 300, split: false, status: 0 }, { size: 40_000, split: true, status: 0 }]) {
      const reads: number[] = [];
      let settled = false;
      const pending = heldCall(ch, ask, (m) => {
        reads.push(m.length);
        return m.length * 2;
      }).finally(() => (settled = true));
      // The status is held by the server: only an early read can have happened by now.
      await eventually(`the early read of ${ask.size} bytes`, () => reads.length > 0);
      assert.equal(settled, false, 'the call waits for the status');
      await eventually('the held status', () => held.length > 0);
      held.shift()!();
      const r = await pending;
      assert.equal(r.code, GrpcStatus.OK);
      assert.equal(r.message?.length, ask.size);
      assert.deepEqual(r.early, { ok: true, value: ask.size * 2 });
      assert.deepEqual(reads, [ask.size], 'read once, the whole message');
    }
    ch.close();
  });

  it('early: a status other than OK after the message wins (the read is dropped); a read that throws comes back as its error', async () => {
    const ch = channel();
    const denied = heldCall(ch, { size: 100, split: false, status: GrpcStatus.PERMISSION_DENIED }, (m) => m.length);
    await eventually('the held status', () => held.length > 0);
    held.shift()!();
    assert.deepEqual(await denied, { code: GrpcStatus.PERMISSION_DENIED, details: 'refused after the message' });
    const boom = new Error('not an answer');
    const throwing = heldCall(ch, { size: 100, split: true, status: 0 }, () => {
      throw boom;
    });
    await eventually('the held status', () => held.length > 0);
    held.shift()!();
    const r = await throwing;
    assert.equal(r.code, GrpcStatus.OK);
    assert.deepEqual(r.early, { ok: false, error: boom });
    ch.close();
  });

  it('early: a call aborted after the early read and before the status rejects with the reason', async () => {
    const ch = channel();
    const ac = new AbortController();
    let read = false;
    const pending = heldCall(ch, { size: 100, split: false, status: 0 }, () => (read = true), ac.signal);
    await eventually('the early read', () => read);
    ac.abort(new Error('caller left'));
    await assert.rejects(pending, /caller left/);
    await eventually('the held status', () => held.length > 0);
    held.shift()!(); // the stream is already reset: nothing to send
    ch.close();
  });
});

