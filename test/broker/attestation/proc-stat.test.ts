import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isExited, parseProcStat, parseUptimeTicks } from '../../../src/broker/attestation/index.js';

/** A /proc/<pid>/stat line with `comm` and start time `start` (the other fields as a sleeping process has them). */
function statLine(comm: string, state: string, start: number | string): string {
  const after = [state, '1', '4242', '4242', '0', '-1', '4194560', '101', '0', '0', '0', '0', '0', '0', '0', '20', '0', '1', '0', String(start), '2465792', '200'];
  return `4243 (${comm}) ${after.join(' ')} 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n`;
}

test('parseProcStat: state and start time (field 22), also when the command name has spaces and parentheses', () => {
  assert.deepEqual(parseProcStat(statLine('sleep', 'S', 884213)), { state: 'S', startTime: 884213 });
  assert.deepEqual(parseProcStat(statLine('evil) R 1 2 3 (x', 'S', 77)), { state: 'S', startTime: 77 });
  assert.deepEqual(parseProcStat(statLine('a b', 'Z', 5)), { state: 'Z', startTime: 5 });
  assert.equal(parseProcStat(''), undefined);
  assert.equal(parseProcStat('4243 (x) S 1 2'), undefined, 'too few fields');
  assert.equal(parseProcStat(statLine('x', 'S', 'zz')), undefined, 'a start time that is not a number');
  assert.equal(parseProcStat(statLine('x', 'SS', 1)), undefined, 'a state that is not one letter');
});

test('isExited: zombies and dead tasks are gone', () => {
  assert.equal(isExited({ state: 'Z', startTime: 1 }), true);
  assert.equal(isExited({ state: 'X', startTime: 1 }), true);
  assert.equal(isExited({ state: 'S', startTime: 1 }), false);
  assert.equal(isExited({ state: 'R', startTime: 1 }), false);
});

test('parseUptimeTicks: exact hundredths, no floating point', () => {
  assert.equal(parseUptimeTicks('4425.21 8000.11\n'), 442521);
  // 1234.56 * 100 === 123455.99999999999 in floating point; a tick lost would refuse real callers.
  assert.equal(parseUptimeTicks('1234.56 1.00\n'), 123456);
  assert.equal(parseUptimeTicks('0.07 0.00\n'), 7);
  assert.equal(parseUptimeTicks('12 3\n'), undefined);
  assert.equal(parseUptimeTicks(''), undefined);
});
