import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rejectionCode, thrownCode } from './support/error-code.js';
import { FakeClock } from '../support/fake-clock.js';
import { Secret } from '../../src/core/secret.js';
import { RefusalCache, TokenCache, JwtAuthenticator, callerFromReview, TokenReviewAuthenticator, type CaError, type TokenReviewResult } from '../../src/ca/index.js';
import { DeadlineError } from '../../src/core/deadline.js';
import { ConcurrencyLimit } from '../../src/core/concurrency-limit.js';

type AuthnOptions = ConstructorParameters<typeof TokenReviewAuthenticator>[0];

const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

function jwtWithExp(expSeconds: number, salt = 'x'): string {
  return `${enc({ alg: 'RS256' })}.${enc({ exp: expSeconds, salt })}.c2ln`;
}

/** JWT-shaped, without `exp` (as a legacy Secret-based service-account token). */
function jwtNoExp(salt = 'x'): string {
  return `${enc({ alg: 'RS256' })}.${enc({ sub: 'system:serviceaccount:istio-system:ztunnel', salt })}.c2ln`;
}

const OK: TokenReviewResult = {
  authenticated: true,
  username: 'system:serviceaccount:istio-system:ztunnel',
  audiences: ['istio-ca'],
  extra: { 'authentication.kubernetes.io/pod-name': ['ztunnel-a'], 'authentication.kubernetes.io/pod-uid': ['uid-1'] },
};

function setup(result: TokenReviewResult = OK) {
  const clock = new FakeClock();
  const calls: string[][] = [];
  const lookups: string[] = [];
  const cache = new TokenCache({ clock, ttlMs: 60_000, maxEntries: 2 });
  const authn = new TokenReviewAuthenticator({
    clusterId: 'Kubernetes',
    audiences: ['istio-ca'],
    clock,
    cache,
    reviewer: async (_t, aud) => {
      calls.push([...aud]);
      return result;
    },
    onCacheLookup: (r) => lookups.push(r),
  });
  return { clock, calls, lookups, cache, authn };
}

/** A TokenReviewAuthenticator for the CA's audience with a ten-entry cache, recording its cache lookups. */
function reviewing(clock: FakeClock, lookups: string[], options: Pick<AuthnOptions, 'reviewer'> & Partial<AuthnOptions>): TokenReviewAuthenticator {
  return new TokenReviewAuthenticator({
    clusterId: 'Kubernetes',
    audiences: ['istio-ca'],
    clock,
    cache: new TokenCache({ clock, ttlMs: 60_000, maxEntries: 10 }),
    onCacheLookup: (r) => lookups.push(r),
    ...options,
  });
}

test('maps a bound service-account review to a caller with its pod', async () => {
  const { clock, authn, calls } = setup();
  const caller = await authn.authenticate(new Secret(jwtWithExp(clock.now() / 1000 + 3600)));
  assert.deepEqual(calls, [['istio-ca']]);
  assert.equal(caller.namespace, 'istio-system');
  assert.equal(caller.serviceAccount, 'ztunnel');
  assert.equal(caller.podName, 'ztunnel-a');
  assert.equal(caller.podUid, 'uid-1');
  assert.equal(caller.authenticator, 'tokenreview');
});

test('caches by token hash for ttl, never past exp', async () => {
  const { clock, authn, calls, lookups } = setup();
  const longToken = new Secret(jwtWithExp(clock.now() / 1000 + 3600, 'a'));
  await authn.authenticate(longToken);
  await authn.authenticate(longToken);
  assert.equal(calls.length, 1);
  assert.deepEqual(lookups, ['miss', 'hit']);
  await clock.advance(60_000);
  await authn.authenticate(longToken);
  assert.equal(calls.length, 2, 'cache entry expired after ttl');

  const shortToken = new Secret(jwtWithExp(clock.now() / 1000 + 10, 'b'));
  await authn.authenticate(shortToken);
  await clock.advance(10_000);
  // exp reached: the cache does not answer, and the token is refused as expired by its own exp,
  // without another review.
  assert.equal(await rejectionCode(authn.authenticate(shortToken)), 'ERR_CA_TOKEN_EXPIRED');
  assert.equal(calls.length, 3);
});

test('a token without a readable exp is never cached', async () => {
  const { authn, calls } = setup();
  await authn.authenticate(new Secret(jwtNoExp()));
  await authn.authenticate(new Secret(jwtNoExp()));
  assert.equal(calls.length, 2);
});

test('concurrent reviews of one token share one request', async () => {
  const { clock, authn, calls, lookups } = setup();
  const t = new Secret(jwtWithExp(clock.now() / 1000 + 3600));
  await Promise.all([authn.authenticate(t), authn.authenticate(t), authn.authenticate(t)]);
  assert.equal(calls.length, 1);
  assert.deepEqual(lookups, ['miss', 'shared', 'shared']);
});

test('cache is bounded', async () => {
  const { clock, authn, cache } = setup();
  for (const s of ['1', '2', '3', '4']) await authn.authenticate(new Secret(jwtWithExp(clock.now() / 1000 + 3600, s)));
  assert.equal(cache.size, 2);
});

test('rejections carry codes', async () => {
  assert.equal(await rejectionCode(setup({ authenticated: false, error: 'bad' }).authn.authenticate(new Secret(jwtNoExp()))), 'ERR_CA_TOKEN_INVALID');
  assert.equal(await rejectionCode(setup({ ...OK, audiences: ['other'] }).authn.authenticate(new Secret(jwtNoExp()))), 'ERR_CA_TOKEN_AUDIENCE');
  assert.equal(await rejectionCode(setup({ ...OK, username: 'alice' }).authn.authenticate(new Secret(jwtNoExp()))), 'ERR_CA_TOKEN_NOT_SERVICE_ACCOUNT');
  const broken = setup();
  const failing = new TokenReviewAuthenticator({
    clusterId: 'Kubernetes', audiences: ['istio-ca'], clock: broken.clock, cache: broken.cache,
    reviewer: async () => { throw new Error('connection refused'); },
  });
  assert.equal(await rejectionCode(failing.authenticate(new Secret(jwtNoExp()))), 'ERR_CA_AUTHN_BACKEND');
});

test('a review without status.audiences (valid only for the apiserver audience) is refused when we asked for ours', async () => {
  const { authn, calls } = setup({ ...OK, audiences: [] });
  assert.equal(await rejectionCode(authn.authenticate(new Secret(jwtNoExp('1')))), 'ERR_CA_TOKEN_AUDIENCE');
  const { audiences: _omitted, ...noField } = OK;
  assert.equal(await rejectionCode(setup(noField).authn.authenticate(new Secret(jwtNoExp('2')))), 'ERR_CA_TOKEN_AUDIENCE');
  assert.deepEqual(calls, [['istio-ca']], 'the review did ask for our audience');
  // One of several returned audiences being ours is enough.
  const caller = await setup({ ...OK, audiences: ['https://kubernetes.default.svc', 'istio-ca'] }).authn.authenticate(new Secret(jwtNoExp('3')));
  assert.equal(caller.serviceAccount, 'ztunnel');
});

test('no configured audience never means "any": the review is refused and the authenticator does not start', () => {
  // A review that would pass with our audience configured...
  const context = { clusterId: 'Kubernetes', nowMs: 0, expiresAtMs: undefined };
  assert.equal(callerFromReview(OK, { ...context, audiences: ['istio-ca'] }).serviceAccount, 'ztunnel');
  // ...is refused without one, whatever audiences the apiserver says the token has.
  for (const result of [OK, { ...OK, audiences: [] }, { ...OK, audiences: ['https://kubernetes.default.svc'] }]) {
    assert.equal(thrownCode(() => callerFromReview(result, { ...context, audiences: [] })), 'ERR_CA_TOKEN_AUDIENCE');
  }
  const { clock, cache } = setup();
  const options = { clusterId: 'Kubernetes', clock, cache, reviewer: async () => OK };
  assert.equal(thrownCode(() => new TokenReviewAuthenticator({ ...options, audiences: [] })), 'ERR_CONFIG_INVALID');
  assert.equal(thrownCode(() => new TokenReviewAuthenticator({ ...options, audiences: [' '] })), 'ERR_CONFIG_INVALID');
  const keys = async () => { throw new Error('never asked for a key'); };
  assert.equal(thrownCode(() => new JwtAuthenticator({ clusterId: 'Kubernetes', issuer: 'https://issuer.example', audiences: [], algorithms: ['ES256'], keys, clock, cache })), 'ERR_CONFIG_INVALID');
});

test('a string that is not a JWT is refused as ERR_CA_TOKEN_MALFORMED without a review', async () => {
  const { authn, calls } = setup();
  for (const t of ['opaque-token', 'a.b', 'a.b.c.d', `${enc({ alg: 'none' })}.${enc({})}.`, `${enc({ alg: 'RS256' })}.bm90IGpzb24.c2ln`, 'x'.repeat(20_000)]) {
    assert.equal(await rejectionCode(authn.authenticate(new Secret(t))), 'ERR_CA_TOKEN_MALFORMED', t.slice(0, 40));
  }
  assert.equal(calls.length, 0, 'no TokenReview');
});

test('an expired token is ERR_CA_TOKEN_EXPIRED: by its exp before a review (none sent), and when it expires during the review', async () => {
  // The API server only says "not authenticated" for an expired token.
  const { clock, authn, calls } = setup({ authenticated: false, error: 'invalid bearer token' });
  assert.equal(await rejectionCode(authn.authenticate(new Secret(jwtWithExp(clock.now() / 1000 - 1)))), 'ERR_CA_TOKEN_EXPIRED');
  assert.equal(calls.length, 0, 'no TokenReview for a token already expired');

  const slowClock = new FakeClock();
  const expiring = new Secret(jwtWithExp(slowClock.now() / 1000 + 5));
  const slow = new TokenReviewAuthenticator({
    clusterId: 'Kubernetes',
    audiences: ['istio-ca'],
    clock: slowClock,
    cache: new TokenCache({ clock: slowClock, ttlMs: 60_000, maxEntries: 10 }),
    reviewer: async () => {
      await slowClock.advance(6000); // the review takes long enough for exp to pass
      return { authenticated: false, error: 'invalid bearer token, token has expired' };
    },
  });
  assert.equal(await rejectionCode(slow.authenticate(expiring)), 'ERR_CA_TOKEN_EXPIRED');
  // Still valid by its exp: the API server's "no" stays ERR_CA_TOKEN_INVALID.
  assert.equal(await rejectionCode(setup({ authenticated: false }).authn.authenticate(new Secret(jwtWithExp(clock.now() / 1000 + 600)))), 'ERR_CA_TOKEN_INVALID');
});

test('refusals are remembered by token hash for their ttl (one review per ttl), backend failures never; bounded', async () => {
  const clock = new FakeClock();
  let answer: TokenReviewResult | Error = { authenticated: false, error: 'invalid bearer token' };
  let reviews = 0;
  const lookups: string[] = [];
  const refusals = new RefusalCache({ clock, ttlMs: 10_000, maxEntries: 2 });
  const authn = reviewing(clock, lookups, {
    refusals,
    reviewer: async () => {
      reviews++;
      if (answer instanceof Error) throw answer;
      return answer;
    },
  });
  const forged = new Secret(jwtWithExp(clock.now() / 1000 + 3600, 'forged'));
  for (let i = 0; i < 50; i++) assert.equal(await rejectionCode(authn.authenticate(forged)), 'ERR_CA_TOKEN_INVALID');
  assert.equal(reviews, 1, 'a repeated forged token costs one review');
  assert.equal(lookups.filter((l) => l === 'refused').length, 49);
  await clock.advance(10_000);
  assert.equal(await rejectionCode(authn.authenticate(forged)), 'ERR_CA_TOKEN_INVALID');
  assert.equal(reviews, 2, 'reviewed again after the ttl');

  // "Could not decide" is not a verdict: never remembered.
  answer = new Error('connection refused');
  const other = new Secret(jwtWithExp(clock.now() / 1000 + 3600, 'other'));
  assert.equal(await rejectionCode(authn.authenticate(other)), 'ERR_CA_AUTHN_BACKEND');
  answer = OK;
  assert.equal((await authn.authenticate(other)).serviceAccount, 'ztunnel', 'works once the API server answers');

  answer = { authenticated: false };
  for (const salt of ['1', '2', '3']) await rejectionCode(authn.authenticate(new Secret(jwtWithExp(clock.now() / 1000 + 3600, salt))));
  assert.equal(refusals.size, 2, 'bounded');
});

test('a review that fails (5xx, timeout) is an outage for every call sharing it: UNAVAILABLE, not a refusal, not cached; the next call reviews again', async () => {
  const clock = new FakeClock();
  const refusals = new RefusalCache({ clock, ttlMs: 10_000, maxEntries: 10 });
  const lookups: string[] = [];
  let reviews = 0;
  let release!: (failure: unknown) => void;
  let fail = true;
  const authn = reviewing(clock, lookups, {
    refusals,
    reviewer: async () => {
      reviews++;
      if (!fail) return OK;
      // The first review hangs until the test fails it, so the other calls join it in flight.
      return new Promise<TokenReviewResult>((_resolve, reject) => (release = reject));
    },
  });
  const token = new Secret(jwtWithExp(clock.now() / 1000 + 3600, 'shared'));
  for (const failure of [new Error('500 Internal error occurred'), new DeadlineError('TokenReview', 5000)]) {
    fail = true;
    lookups.length = 0;
    const calls = Array.from({ length: 8 }, () => authn.authenticate(token).then(() => undefined, (err: unknown) => err));
    await Promise.resolve();
    release(failure);
    const errors = await Promise.all(calls);
    assert.deepEqual(lookups, ['miss', 'shared', 'shared', 'shared', 'shared', 'shared', 'shared', 'shared'], 'one review for the eight calls');
    for (const err of errors) {
      assert.equal((err as CaError).code, 'ERR_CA_AUTHN_BACKEND');
      assert.equal((err as CaError).status, 'unavailable', 'an outage of the API server is not an authentication refusal');
      assert.equal((err as CaError).publicMessage, 'authentication backend unavailable');
    }
    assert.equal(refusals.size, 0, 'the failed shared review is not remembered as a refusal');
  }
  fail = false;
  assert.equal((await authn.authenticate(token)).serviceAccount, 'ztunnel', 'the next call reviews again and succeeds');
  assert.equal(reviews, 3);
});

test('a bounded number of reviews of distinct tokens at once (a fleet of brokers starting together); each token still reviewed once, every caller answered', async () => {
  const clock = new FakeClock();
  let inFlight = 0;
  let peak = 0;
  let reviews = 0;
  const authn = new TokenReviewAuthenticator({
    clusterId: 'Kubernetes',
    audiences: ['istio-ca'],
    clock,
    cache: new TokenCache({ clock, ttlMs: 60_000, maxEntries: 1000 }),
    limit: new ConcurrencyLimit(4),
    reviewer: async () => {
      reviews++;
      peak = Math.max(peak, ++inFlight);
      await new Promise((r) => setImmediate(r));
      inFlight--;
      return OK;
    },
  });
  // 50 brokers, 8 calls each with the broker's one token.
  const tokens = Array.from({ length: 50 }, (_, i) => jwtWithExp(clock.now() / 1000 + 3600, `broker-${i}`));
  const callers = await Promise.all(tokens.flatMap((t) => Array.from({ length: 8 }, () => authn.authenticate(new Secret(t)))));
  assert.equal(callers.length, 400);
  assert.equal(reviews, 50, 'one review per token');
  assert.equal(peak, 4, 'never more than the limit in flight');
});

test('a token in use is reviewed again in the background before its cache entry ends: the caller never waits for it, and a failed refresh changes nothing until the entry ends', async () => {
  const clock = new FakeClock();
  const lookups: string[] = [];
  let reviews = 0;
  let fail = false;
  const authn = reviewing(clock, lookups, {
    reviewer: async () => {
      reviews++;
      if (fail) throw new Error('API server down');
      return OK;
    },
  });
  const token = new Secret(jwtWithExp(clock.now() / 1000 + 3600));
  await authn.authenticate(token);
  await clock.advance(30_000);
  await authn.authenticate(token);
  assert.deepEqual([reviews, lookups], [1, ['miss', 'hit']], 'half way through: a plain hit');
  await clock.advance(20_000);
  await authn.authenticate(token);
  assert.deepEqual([reviews, lookups.slice(2)], [2, ['hit', 'refresh']], 'in the last fifth: a hit, and a review in the background');
  await new Promise((r) => setImmediate(r));
  await clock.advance(20_000);
  await authn.authenticate(token);
  assert.deepEqual([reviews, lookups.slice(4)], [2, ['hit']], 'past the first entry\'s end: the refreshed one, no wait');
  // A refresh that fails: the entry still serves until its end, then the next call reviews.
  fail = true;
  await clock.advance(35_000);
  await authn.authenticate(token);
  await new Promise((r) => setImmediate(r));
  assert.equal(reviews, 3);
  await clock.advance(10_000);
  assert.equal(await rejectionCode(authn.authenticate(token)), 'ERR_CA_AUTHN_BACKEND');
  assert.equal(reviews, 4);
});
