/**
 * The Broker API checks its caller's certificate against the X509-SVID rules on every call; the
 * verdict depends only on the certificate's bytes, so it is remembered per certificate (parsing
 * one cost more than the rest of a first message: bench:broker's first-message p50 went from 1.5x
 * to 2.9x a bare unary call when every call parsed it).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { peerSvid } from '../../src/broker/fronts/broker-api/index.js';

test('peerSvid remembers the verdict of a certificate it has seen, and tells certificates apart', () => {
  const a = Buffer.from('not a certificate');
  const first = peerSvid(a);
  assert.ok('problems' in first && first.problems.length > 0);
  assert.equal(peerSvid(Buffer.from(a)), first, 'same bytes, same remembered verdict');
  const b = Buffer.from('another non-certificate');
  assert.notEqual(peerSvid(b), first);
  assert.deepEqual(peerSvid(undefined), { problems: ['no client certificate'] });
});

test('peerSvid keeps a bounded number of verdicts', () => {
  const first = peerSvid(Buffer.from('evicted-0'));
  for (let i = 1; i <= 200; i++) peerSvid(Buffer.from(`evicted-${i}`));
  assert.notEqual(peerSvid(Buffer.from('evicted-0')), first, 'the oldest verdict was dropped, so it is computed afresh');
});
