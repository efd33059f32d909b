import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, flushMicrotasks } from '../support/fake-clock.js';
import { silentLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { BrokerError, type FetchedToken, tokenRefreshDelay, TokenSource } from '../../src/broker/index.js';

const HOUR = 3_600_000;

function scripted(clock: FakeClock) {
  const log: string[] = [];
  let mode: 'ok' | 'fail' = 'ok';
  let n = 0;
  const fetcher = async (): Promise<FetchedToken> => {
    log.push(mode);
    if (mode === 'fail') throw new Error('apiserver down');
    return { token: new Secret(`t${++n}`), expiresAt: clock.now() + HOUR, source: 'token-request' };
  };
  return { fetcher, log, setMode: (m: 'ok' | 'fail') => (mode = m) };
}

describe('TokenSource', () => {
  it('refreshes at 80 % of the lifetime (jitter centred)', async () => {
    const clock = new FakeClock();
    const p = scripted(clock);
    const src = new TokenSource({ primary: p.fetcher, clock, rng: () => 0.5, logger: silentLogger });
    const ac = new AbortController();
    const loop = src.run(ac.signal);
    assert.equal((await src.token()).reveal(), 't1');
    await clock.waitForTimers(1);
    await clock.advance(0.8 * HOUR - 1);
    assert.equal(p.log.length, 1);
    await clock.advance(1);
    assert.equal(p.log.length, 2);
    assert.equal((await src.token()).reveal(), 't2');
    ac.abort();
    await loop;
  });

  it('keeps the current token while refreshes fail, backing off, until it expires', async () => {
    const clock = new FakeClock();
    const p = scripted(clock);
    const outcomes: string[] = [];
    const src = new TokenSource({ primary: p.fetcher, clock, rng: () => 0.5, logger: silentLogger, onFetch: (o) => outcomes.push(o) });
    const ac = new AbortController();
    const loop = src.run(ac.signal);
    await src.token();
    p.setMode('fail');
    await clock.waitForTimers(1);
    await clock.advance(0.8 * HOUR);
    await clock.advance(500);
    await clock.advance(1000);
    assert.deepEqual(p.log, ['ok', 'fail', 'fail', 'fail'], 'retries at 500 ms, then 1 s');
    assert.deepEqual(outcomes, ['ok', 'error', 'error', 'error'], 'every attempt reaches the metrics hook');
    assert.equal(src.ready, true);
    assert.equal((await src.token()).reveal(), 't1', 'old token still used');
    await clock.advance(0.2 * HOUR);
    assert.equal(src.ready, false, 'expired');
    const waiting = src.token();
    p.setMode('ok');
    await clock.advance(150_000);
    assert.equal((await waiting).reveal(), 't2');
    ac.abort();
    await loop;
  });

  it('falls back to the projected token file when TokenRequest fails and no token is held', async () => {
    const clock = new FakeClock();
    const p = scripted(clock);
    p.setMode('fail');
    const fallback = async (): Promise<FetchedToken> => ({ token: new Secret('file'), expiresAt: clock.now() + HOUR, source: 'file' });
    const src = new TokenSource({ primary: p.fetcher, fallback, clock, rng: () => 0.5, logger: silentLogger });
    const ac = new AbortController();
    const loop = src.run(ac.signal);
    assert.equal((await src.token()).reveal(), 'file');
    ac.abort();
    await loop;
  });

  it('rejects waiters with ERR_TOKEN_UNAVAILABLE when no source works', async () => {
    const clock = new FakeClock();
    const p = scripted(clock);
    p.setMode('fail');
    const src = new TokenSource({ primary: p.fetcher, clock, rng: () => 0.5, logger: silentLogger });
    const waiting = src.token();
    const ac = new AbortController();
    const loop = src.run(ac.signal);
    await assert.rejects(waiting, (e: unknown) => e instanceof BrokerError && e.code === 'ERR_TOKEN_UNAVAILABLE');
    ac.abort();
    await flushMicrotasks();
    await loop;
  });

  it('spreads the refresh delay ±10 %', () => {
    assert.equal(tokenRefreshDelay({ now: 0, expiresAt: 1000, fraction: 0.8, spread: 0.1, rng: () => 0 }), 720);
    assert.equal(tokenRefreshDelay({ now: 0, expiresAt: 1000, fraction: 0.8, spread: 0.1, rng: () => 0.5 }), 800);
  });
});
