/**
 * Interop of the CA's HTTP/2 transports with independent HTTP/2 and gRPC implementations, per
 * kind in H2_TRANSPORT_KINDS, on the CA as deployed: nghttp2's h2load (2000 health Checks over 4
 * connections, 8 streams each: all 2xx, none failed), nghttp (a POST whose trailers carry
 * grpc-status 0), Python grpcio (CreateCertificate, through test/ca/support/python-interop.ts)
 * and grpc-js (the CA client the tests use). A missing tool skips its case with the reason.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { HEALTH_CHECK_PATH } from '../../src/protocol/grpc-health.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { caClient } from '../ca/support/ca-env.js';
import { tempDir } from '../ca/support/pki-fixtures.js';
import { interopCall, writeCaStubs } from '../ca/support/python-interop.js';
import { commandProblem, h2loadMissing, pythonGrpcMissing } from '../support/tools.js';
import { grpcMessage } from './support/frame-client.js';
import { H2_TRANSPORT_KINDS, startTarget, type H2Target } from './support/targets.js';

const run = promisify(execFile);
const nghttpMissing = commandProblem('nghttp', ['--version'], 'Debian package nghttp2-client: apt-get install nghttp2-client');
const pythonMissing = pythonGrpcMissing();
const ZTUNNEL_ID = 'spiffe://cluster.local/ns/istio-system/sa/ztunnel';

for (const kind of H2_TRANSPORT_KINDS) {
  describe(`HTTP/2 interop of the CA's '${kind}' transport`, () => {
    let t: H2Target;
    let work: { path: string; remove: () => Promise<void> };
    let body: string;

    before(async () => {
      t = await startTarget(kind);
      work = await tempDir('h2-interop-');
      // An empty HealthCheckRequest (the whole server) in its gRPC frame.
      body = join(work.path, 'health-check.bin');
      await writeFile(body, grpcMessage(Buffer.alloc(0)));
    });

    after(async () => {
      await t?.close();
      await work?.remove();
    });

    it('h2load: 2000 health Checks, 4 connections x 8 streams: every one 2xx, none failed or errored', { skip: h2loadMissing() }, async (ctx) => {
      const url = `https://127.0.0.1:${t.port}${HEALTH_CHECK_PATH}`;
      const { stdout } = await run('h2load', ['-n', '2000', '-c', '4', '-m', '8', '-d', body, '-H', 'content-type: application/grpc', '-H', 'te: trailers', url], { maxBuffer: 1 << 22 });
      const requests = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/u.exec(stdout);
      const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/u.exec(stdout);
      ctx.diagnostic(`${kind}: ${requests?.[0] ?? '?'}; ${codes?.[0] ?? '?'}`);
      assert.ok(requests && codes, stdout);
      assert.deepEqual(requests.slice(1).map(Number), [2000, 2000, 2000, 2000, 0, 0, 0], requests[0]);
      assert.deepEqual(codes.slice(1).map(Number), [2000, 0, 0, 0], codes[0]);
      assert.match(stdout, /Application protocol: h2/u);
    });

    it('nghttp -v: a gRPC POST is answered 200 with grpc-status 0 in the trailers', { skip: nghttpMissing }, async () => {
      const url = `https://127.0.0.1:${t.port}${HEALTH_CHECK_PATH}`;
      const { stdout } = await run('nghttp', ['-v', '-d', body, '-H', 'content-type: application/grpc', '-H', 'te: trailers', url], { maxBuffer: 1 << 22 });
      assert.match(stdout, /recv \(stream_id=\d+\) :status: 200/u, stdout);
      // The trailers: a second HEADERS frame with END_STREAM after the response's DATA.
      const trailers = stdout.slice(stdout.indexOf('recv DATA frame'));
      assert.match(trailers, /recv \(stream_id=\d+\) grpc-status: 0/u, stdout);
      assert.match(trailers, /recv HEADERS frame <[^>]*flags=0x05/u, 'trailers end the stream');
    });

    it('Python grpcio: CreateCertificate issues the caller\'s SVID', { skip: pythonMissing }, async () => {
      await writeCaStubs(work.path);
      await writeFile(join(work.path, 'roots.pem'), t.rootsPem);
      await writeFile(join(work.path, 'csr.pem'), await t.csr());
      await writeFile(join(work.path, 'token'), t.ztunnel);
      const answer = await interopCall({ stubs: work.path, target: `127.0.0.1:${t.port}`, rootsFile: join(work.path, 'roots.pem'), csrFile: join(work.path, 'csr.pem'), tokenFile: join(work.path, 'token') });
      assert.equal(answer.code, undefined, JSON.stringify(answer));
      assert.equal(checkX509Svid(answer.cert_chain![0]!)?.id, ZTUNNEL_ID);
      await writeFile(join(work.path, 'bad-token'), 'not.a.token');
      const denied = await interopCall({ stubs: work.path, target: `127.0.0.1:${t.port}`, rootsFile: join(work.path, 'roots.pem'), csrFile: join(work.path, 'csr.pem'), tokenFile: join(work.path, 'bad-token') });
      assert.equal(denied.code, 'UNAUTHENTICATED', JSON.stringify(denied));
    });

    it('grpc-js: CreateCertificate issues the caller\'s SVID; several calls share the connection', async () => {
      const c = caClient(t.port, t.rootsPem);
      try {
        const answers = await Promise.all(Array.from({ length: 4 }, async () => c.create({ token: t.ztunnel, csr: await t.csr() })));
        for (const a of answers) {
          assert.equal(a.code, undefined, JSON.stringify(a));
          assert.equal(checkX509Svid(a.chain![0]!)?.id, ZTUNNEL_ID);
        }
        const none = await c.create({ csr: await t.csr() });
        assert.equal(none.errorCode, 'ERR_CA_UNAUTHENTICATED');
      } finally {
        c.close();
      }
    });
  });
}
