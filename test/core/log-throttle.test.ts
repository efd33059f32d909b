/**
 * LogThrottle: per key at most one line per interval (read off the injected clock), the lines
 * held back counted into the next one; keys apart; debug lines cost nothing when not written.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LogThrottle } from '../../src/core/log-throttle.js';
import { createLogger, type LogFields } from '../../src/core/log.js';
import { FakeClock } from '../support/fake-clock.js';

function capture(level: 'debug' | 'info') {
  const lines: LogFields[] = [];
  return { lines, logger: createLogger({ level, sink: (l) => lines.push(JSON.parse(l) as LogFields) }) };
}

test('log throttle: one line per key per interval; the held-back ones are counted into the next', async () => {
  const clock = new FakeClock();
  const { lines, logger } = capture('debug');
  const throttle = new LogThrottle({ logger, clock, intervalMs: 10_000 });
  for (let i = 0; i < 5; i++) throttle.log('warn', 'session:ECONNRESET', 'session error', { code: 'ECONNRESET' });
  throttle.log('warn', 'stream:EPIPE', 'stream error');
  assert.deepEqual(lines.map((l) => [l.msg, l.suppressed]), [['session error', undefined], ['stream error', undefined]]);
  await clock.advance(9_999);
  throttle.log('warn', 'session:ECONNRESET', 'session error');
  assert.equal(lines.length, 2, 'still inside the interval');
  await clock.advance(1);
  throttle.log('warn', 'session:ECONNRESET', 'session error', { code: 'ECONNRESET' });
  assert.equal(lines.length, 3);
  assert.equal(lines[2]!.suppressed, 5, 'the five held back since the last line');
  assert.equal(lines[2]!.level, 'warn');
  assert.equal(lines[2]!.code, 'ECONNRESET');
  assert.equal(clock.pendingTimers, 0, 'no timer');
});

test('log throttle: debug lines at a higher level are neither written nor counted; keys are bounded', () => {
  const clock = new FakeClock();
  const { lines, logger } = capture('info');
  const throttle = new LogThrottle({ logger, clock, intervalMs: 1000, maxKeys: 2 });
  throttle.log('debug', 'a', 'quiet');
  assert.equal(lines.length, 0);
  throttle.log('info', 'a', 'one');
  throttle.log('info', 'b', 'two');
  throttle.log('info', 'c', 'three'); // pushes 'a' out
  throttle.log('info', 'a', 'one again');
  assert.deepEqual(lines.map((l) => l.msg), ['one', 'two', 'three', 'one again'], "a forgotten key logs at once");
});
