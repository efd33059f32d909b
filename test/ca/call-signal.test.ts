/**
 * The CallAbort the HTTP/2 transports hand CreateCertificate handlers (src/ca/call-signal.ts):
 * `aborted` without an AbortSignal, an AbortSignal only on request, aborted at once when asked for
 * after the call ended, and aborted with the call when asked for before; `abortSignalOf` passes a
 * plain AbortSignal through.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { abortSignalOf, LazyCallAbort } from '../../src/ca/index.js';

test('a LazyCallAbort: aborted as a flag; its AbortSignal made on request follows the call', () => {
  const before = new LazyCallAbort();
  assert.equal(before.aborted, false);
  const signal = abortSignalOf(before);
  assert.equal(signal.aborted, false);
  assert.equal(before.signal(), signal, 'one AbortSignal per call');
  let heard = 0;
  signal.addEventListener('abort', () => heard++);
  before.abort();
  before.abort();
  assert.equal(before.aborted, true);
  assert.equal(signal.aborted, true);
  assert.equal(heard, 1, 'aborted once');

  const after = new LazyCallAbort();
  after.abort();
  assert.equal(after.aborted, true);
  assert.equal(after.signal().aborted, true, 'asked for after the call ended: already aborted');
});

test('abortSignalOf passes an AbortSignal through', () => {
  const ac = new AbortController();
  assert.equal(abortSignalOf(ac.signal), ac.signal);
});
