/**
 * core/deadline.ts: a deadline with a parent and a caller signal aborts with whichever fires
 * first (the caller's reason, the parent's, or DeadlineError at the limit on the injected clock);
 * eitherSignal joins two signals and lets go of both on dispose.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deadline, eitherSignal, isDeadlineError } from '../../src/core/deadline.js';
import { FakeClock } from '../support/fake-clock.js';

describe('deadline with a caller signal', () => {
  it('aborts with the caller reason when the caller gives up before the limit', async () => {
    const clock = new FakeClock();
    const parent = new AbortController();
    const caller = new AbortController();
    const d = deadline(10_000, { what: 'x', parent: parent.signal, caller: caller.signal, clock });
    assert.equal(d.signal.aborted, false);
    caller.abort('gone');
    assert.equal(d.signal.aborted, true);
    assert.equal(d.signal.reason, 'gone');
    d.dispose();
  });

  it('aborts with the parent reason, and at the limit with DeadlineError, when the caller stays', async () => {
    const clock = new FakeClock();
    const parent = new AbortController();
    const caller = new AbortController();
    const a = deadline(10_000, { what: 'a', parent: parent.signal, caller: caller.signal, clock });
    parent.abort('closing');
    assert.equal(a.signal.reason, 'closing');
    a.dispose();
    const b = deadline(1000, { what: 'b', caller: caller.signal, clock });
    await clock.waitForTimers(1);
    await clock.advance(1000);
    assert.ok(isDeadlineError(b.signal.reason));
    b.dispose();
    caller.abort('late');
    assert.equal(caller.signal.aborted, true);
  });

  it('eitherSignal: without a second signal it is the first; disposed, a later abort is not passed on', () => {
    const a = new AbortController();
    assert.equal(eitherSignal(a.signal, undefined).signal, a.signal);
    const b = new AbortController();
    const joined = eitherSignal(a.signal, b.signal);
    joined.dispose();
    b.abort('x');
    assert.equal(joined.signal.aborted, false);
    const again = eitherSignal(a.signal, b.signal);
    assert.equal(again.signal.reason, 'x', 'an already aborted one is taken at once');
  });
});
