/** core/errors: errCode, the one reader of a thrown Error's string `code`. */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CertbrokerError, errCode } from '../../src/core/errors.js';

test('errCode: the string code of an Error (errno, Node, ours), else undefined', async () => {
  const enoent = await readFile('/nonexistent/certbroker').catch((err: unknown) => err);
  assert.equal(errCode(enoent), 'ENOENT');
  assert.equal(errCode(await sleep(1, undefined, { signal: AbortSignal.abort() }).catch((e: unknown) => e)), 'ABORT_ERR');
  assert.equal(errCode(new DOMException('x', 'AbortError')), undefined, "a DOMException's code is a number");
  assert.equal(errCode(new CertbrokerError('ERR_X', 'm', { status: 'internal' })), 'ERR_X');
  assert.equal(errCode(Object.assign(new Error('http'), { code: 404 })), undefined, 'a numeric code');
  assert.equal(errCode({ code: 'EPIPE' }), undefined, 'not an Error');
  assert.equal(errCode(null), undefined);
  assert.equal(errCode(new Error('plain')), undefined);
});
