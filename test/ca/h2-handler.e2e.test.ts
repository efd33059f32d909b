/**
 * The http2 transport's handler contract (`CreateCertificateHandler`, what the CA's
 * CertificateService and the broker's Istio CA front implement), over real TLS with the lean
 * node:http2 client: a cancellable handler's signal aborts when the caller resets the stream or
 * its grpc-timeout passes, and never for a call it answered; a non-cancellable one gets no
 * signal; a rejection is answered with the handler's status; an unreadable request reaches the
 * handler as MALFORMED_REQUEST.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { abortSignalOf, MALFORMED_REQUEST, resolveLimits, startHttp2Server, type CallSignal, type CreateCertificateHandler, type Http2Server } from '../../src/ca/index.js';
import { systemClock } from '../../src/core/clock.js';
import { createLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { H2UnaryChannel, HealthService, RotatingServerIdentity } from '../../src/grpc/index.js';
import { forwardRequestBytes } from '../../src/broker/index.js';
import type { IstioCertificateRequest } from '../../src/protocol/istio-ca.js';
import { eventually } from '../broker/support/eventually.js';
import { silentTlsMaterial } from '../support/hung-server.js';

const PATH = '/istio.v1.auth.IstioCertificateService/CreateCertificate';

/** A handler that records each call and answers as its CSR says: `ok`, `refuse` (or unreadable), or `hang` (until its signal aborts). */
class Probe implements CreateCertificateHandler {
  readonly calls: Array<{ readonly csr: string | undefined; readonly malformed: boolean; readonly signal: CallSignal | undefined }> = [];
  constructor(readonly cancellable: boolean) {}

  createCertificate(request: IstioCertificateRequest, _md: unknown, signal?: CallSignal): Promise<{ cert_chain: string[] }> {
    this.calls.push({ csr: request.csr, malformed: request === MALFORMED_REQUEST, signal });
    if (request === MALFORMED_REQUEST || request.csr === 'refuse') return Promise.reject(new Error('no'));
    // The AbortSignal is asked for only here (the transport makes it on demand).
    if (request.csr === 'hang') return new Promise((_resolve, reject) => (signal ? abortSignalOf(signal) : undefined)?.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
    return Promise.resolve({ cert_chain: ['leaf', 'root'] });
  }

  rejection(): { code: number; details: string; metadata: [] } {
    return { code: GrpcStatus.PERMISSION_DENIED, details: 'probe says no', metadata: [] };
  }
}


for (const engine of ['node', 'h2'] as const) {
  describe(`${engine === 'node' ? 'http2' : 'h2'} transport: the CreateCertificateHandler contract`, () => {
    let rootsPem: string;
    const servers: Http2Server[] = [];
    const channels: H2UnaryChannel[] = [];

    async function serve(handler: Probe): Promise<H2UnaryChannel> {
      const material = await silentTlsMaterial();
      rootsPem = material.caCertPem;
      const identity = new RotatingServerIdentity();
      identity.update(material.certPem, new Secret(material.keyPem));
      const server = await startHttp2Server({ host: '127.0.0.1', port: 0, identity, handler, health: new HealthService(), limits: resolveLimits(undefined), logger: createLogger({ level: 'silent' }), clock: systemClock, engine });
      servers.push(server);
      const channel = new H2UnaryChannel({ address: `127.0.0.1:${server.port}`, rootsPem, serverName: 'localhost', handshakeTimeoutMs: 5000 });
      channels.push(channel);
      return channel;
    }
    const call = (ch: H2UnaryChannel, csr: string, o: { timeoutMs?: number; signal?: AbortSignal } = {}) =>
      ch.call({ path: PATH, metadata: {}, message: forwardRequestBytes({ csrPem: csr, identity: 'spiffe://td/ns/a/sa/b', ttlSeconds: 60 }), timeoutMs: o.timeoutMs ?? 10_000, signal: o.signal ?? new AbortController().signal });

    after(async () => {
      for (const c of channels) c.close();
      for (const s of servers) await s.stop(100);
    });

    it('an answered call: the chain comes back and its signal is never aborted', async () => {
      const probe = new Probe(true);
      const ch = await serve(probe);
      const r = await call(ch, 'ok');
      assert.equal(r.code, GrpcStatus.OK);
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(probe.calls.length, 1);
      assert.equal(probe.calls[0]!.signal?.aborted, false, 'answered: not aborted when the stream closes');
    });

    it('a caller that resets the stream, and one whose grpc-timeout passes, abort the signal', async () => {
      const probe = new Probe(true);
      const ch = await serve(probe);
      const ac = new AbortController();
      const reset = call(ch, 'hang', { signal: ac.signal });
      await eventually('the call at the handler', () => probe.calls.length === 1);
      ac.abort(new Error('gone'));
      await assert.rejects(reset, /gone/);
      await eventually('the reset call aborted', () => probe.calls[0]!.signal!.aborted);
      const late = await call(ch, 'hang', { timeoutMs: 100 });
      assert.equal(late.code, GrpcStatus.DEADLINE_EXCEEDED);
      await eventually('the late call aborted', () => probe.calls.length === 2 && probe.calls[1]!.signal!.aborted);
    });

    it("a non-cancellable handler gets no signal; a rejection is the handler's status; bytes that are not a request are MALFORMED_REQUEST", async () => {
      const probe = new Probe(false);
      const ch = await serve(probe);
      assert.equal((await call(ch, 'ok')).code, GrpcStatus.OK);
      assert.deepEqual(await call(ch, 'refuse'), { code: GrpcStatus.PERMISSION_DENIED, details: 'probe says no' });
      const garbage = await ch.call({ path: PATH, metadata: {}, message: Buffer.from([0x0a, 0xff, 0xff]), timeoutMs: 10_000, signal: new AbortController().signal });
      assert.equal(garbage.code, GrpcStatus.PERMISSION_DENIED, 'the probe refuses what it cannot read, with its own status');
      assert.deepEqual(
        probe.calls.map((c) => [c.csr, c.malformed, c.signal]),
        [
          ['ok', false, undefined],
          ['refuse', false, undefined],
          [undefined, true, undefined],
        ],
      );
    });
  });
}
