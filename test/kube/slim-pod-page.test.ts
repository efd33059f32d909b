/**
 * A malformed JSON document is a certbroker error with its own code (`ERR_JSON_MALFORMED`,
 * INVALID_ARGUMENT once mapped to gRPC, never an unexpected INTERNAL), and the API server's pod
 * list answer that is not a list (truncated, bad JSON, no items) is the kube room's
 * `ERR_KUBE_RESPONSE_INVALID` (unavailable: it is the API server's fault, not a caller's), over a
 * real HTTP answer on loopback.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, get, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { CertbrokerError } from '../../src/core/errors.js';
import { JsonScanError } from '../../src/core/json-field-scanner.js';
import { createLogger } from '../../src/core/log.js';
import { readSlimPodPage } from '../../src/kube/slim-pod-page.js';
import { grpcStatusFor } from '../../src/ops/grpc-errors.js';
import { ERROR_CODE_METADATA } from '../../src/protocol/grpc-status.js';

const BODIES: Record<string, string> = {
  '/truncated': '{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a"',
  '/garbage': '{"kind":"PodList","items":[@]}',
  '/no-items': '{"kind":"Status","code":200}',
  '/ok': '{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]}',
};
let server: Server;
let port: number;

before(async () => {
  server = createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(BODIES[req.url ?? ''] ?? ''));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

function answer(path: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => get({ host: '127.0.0.1', port, path }, resolve).on('error', reject));
}

test('JsonScanError is a CertbrokerError ERR_JSON_MALFORMED, answered INVALID_ARGUMENT with its code, nothing logged as unexpected', () => {
  const err = new JsonScanError('unexpected token', 7);
  assert.ok(err instanceof CertbrokerError);
  assert.equal(err.code, 'ERR_JSON_MALFORMED');
  assert.equal(err.status, 'invalid-argument');
  assert.equal(err.offset, 7);
  const lines: string[] = [];
  const answered = grpcStatusFor(err, createLogger({ level: 'debug', sink: (l) => lines.push(l) }));
  assert.equal(answered.code, GrpcStatus.INVALID_ARGUMENT);
  assert.deepEqual(answered.metadata.find(([k]) => k === ERROR_CODE_METADATA)?.[1], 'ERR_JSON_MALFORMED');
  assert.deepEqual(lines, [], 'not an unexpected error');
});

test("a pod list answer that is not a list is the API server's fault: ERR_KUBE_RESPONSE_INVALID (unavailable), the scanner's error as cause", async () => {
  for (const path of ['/truncated', '/garbage', '/no-items']) {
    const err = await readSlimPodPage(await answer(path), `list pods ${path}`, new AbortController().signal).then(() => assert.fail(`${path} read`), (e: unknown) => e);
    assert.ok(err instanceof CertbrokerError, path);
    assert.equal(err.code, 'ERR_KUBE_RESPONSE_INVALID', path);
    assert.equal(err.status, 'unavailable', path);
    assert.equal((err.cause as CertbrokerError | undefined)?.code, 'ERR_JSON_MALFORMED', path);
  }
  const page = await readSlimPodPage(await answer('/ok'), 'list pods', new AbortController().signal);
  assert.deepEqual(page, { items: [], resourceVersion: '5', continueToken: undefined });
});
