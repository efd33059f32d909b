/**
 * LeafIssuerPool when a worker dies. The workers here really die: the pool is given a worker
 * module (test/pki/workers/) that runs the real leaf worker and exits or throws on a marked
 * request, or one that cannot start at all. The contract under test (see leaf-pool.ts): what a
 * dead worker still held fails with ERR_PKI_POOL_WORKER, nothing it answered is lost, the worker
 * is replaced and the replacement issues real certificates; a worker that keeps dying before it
 * answers anything is respawned a bounded number of times, after which requests fail at once;
 * close() works after all of it. A hang fails these tests through their timeout.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger, type Logger } from '../../src/core/log.js';
import {
  createCsr,
  generateKeyPair,
  LeafIssuerPool,
  parseCertificate,
  PkiError,
  verifyChain,
  type CaCertificate,
  type IssuedLeaf,
  type LeafRequest,
  type LeafSigner,
} from '../../src/pki/index.js';
import { makePoolCa } from './fixtures.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const CRASHING_WORKER = new URL('./workers/crashing-leaf-worker.js', import.meta.url);
const DEAD_AT_START_WORKER = new URL('./workers/dead-at-start-worker.js', import.meta.url);
/** Mirrors MAX_RESPAWNS in src/pki/leaf-pool.ts. */
const MAX_RESPAWNS = 3;
const TIMEOUT = { timeout: 60_000 };

const scratch = Scratch.forFile();
let root: CaCertificate;
let signer: LeafSigner;
let csr: string;
before(async () => {
  ({ root, signer } = await makePoolCa());
  csr = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: 'spiffe://ignored/x' }).pem;
});

const request = (sa: string): LeafRequest => ({ csr, spiffeId: `spiffe://cluster.local/ns/a/sa/${sa}`, ttlSeconds: 600 });
const workerError = (e: unknown): boolean => e instanceof PkiError && e.code === 'ERR_PKI_POOL_WORKER';
const closedError = (e: unknown): boolean => e instanceof PkiError && e.code === 'ERR_PKI_POOL_CLOSED';

interface LogLine {
  readonly level: string;
  readonly msg: string;
  readonly reason: string;
  readonly failedRequests: number;
  readonly deathsInARow: number;
  readonly liveWorkers: number;
}

/** A logger keeping the pool's lines; `until(n)` resolves once n lines have been written. */
function capturedLog(): { logger: Logger; lines: LogLine[]; until: (n: number) => Promise<void> } {
  const lines: LogLine[] = [];
  const waiting: { n: number; resolve: () => void }[] = [];
  const logger = createLogger({
    level: 'debug',
    sink: (line) => {
      lines.push(JSON.parse(line) as LogLine);
      for (const w of waiting.filter((x) => lines.length >= x.n)) w.resolve();
    },
  });
  const until = (n: number) =>
    lines.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ n, resolve }));
  return { logger, lines, until };
}

/** Records unhandled rejections while `body` runs (a settled-twice or dropped promise shows here). */
async function withoutUnhandledRejections(body: () => Promise<void>): Promise<void> {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    await body();
    // Rejections nobody handles are reported after the microtask queue drains.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
  assert.deepEqual(unhandled, []);
}

function assertIssuedByRoot(leaves: readonly IssuedLeaf[]): void {
  for (const leaf of leaves) verifyChain({ leaf: parseCertificate(leaf.pem), roots: [root.cert], nowMs: Date.now() });
}

test('a worker that dies mid-batch fails that batch with ERR_PKI_POOL_WORKER; its replacement issues valid certificates', { ...TIMEOUT, skip: opensslMissing() }, async () => {
  await withoutUnhandledRejections(async () => {
    const log = capturedLog();
    const pool = new LeafIssuerPool({ signer, size: 1, logger: log.logger, workerModule: CRASHING_WORKER });
    try {
      assertIssuedByRoot(await Promise.all([0, 1, 2, 3].map((i) => pool.issue(request(`before${i}`)))));

      // One event-loop turn: one batch to the only worker, which exits on seeing the marker.
      const settled = await Promise.allSettled([pool.issue(request('x')), pool.issue(request('crash-exit')), pool.issue(request('y'))]);
      for (const s of settled) {
        assert.equal(s.status, 'rejected');
        assert.ok(workerError(s.reason), String(s.reason));
        assert.match((s.reason as PkiError).message, /exited with code 1/);
      }
      assert.equal(pool.pending, 0);
      assert.equal(pool.liveWorkers, 1);
      assert.deepEqual(
        log.lines.map((l) => [l.level, l.msg, l.failedRequests, l.deathsInARow, l.liveWorkers]),
        [['warn', 'leaf worker died; replaced', 3, 1, 1]],
      );

      // The replacement has the signer and answers for real; openssl agrees.
      const after = await Promise.all(Array.from({ length: 10 }, (_, i) => pool.issue(request(`after${i}`))));
      assert.equal(new Set(after.map((l) => l.serialHex)).size, 10);
      assertIssuedByRoot(after);
      const files = await Promise.all(after.slice(0, 3).map((l, i) => scratch.write(`after-crash-${i}.pem`, l.pem)));
      const r = await openssl(['verify', '-CAfile', await scratch.write('root.pem', root.pem), ...files]);
      assert.equal(r.code, 0, r.stdout + r.stderr);

      // An uncaught error ('error' then 'exit') is reported with its message. Deaths separated
      // by answers never use up the respawn budget.
      for (let round = 0; round < MAX_RESPAWNS + 2; round++) {
        await assert.rejects(pool.issue(request('crash-throw')), (e: unknown) => workerError(e) && /crashed on purpose/.test((e as Error).message));
        assertIssuedByRoot([await pool.issue(request(`round${round}`))]);
      }
      assert.equal(pool.liveWorkers, 1);
      assert.ok(log.lines.every((l) => l.level === 'warn' && l.deathsInARow === 1), JSON.stringify(log.lines));
    } finally {
      await pool.close();
    }
    assert.equal(pool.liveWorkers, 0);
    await assert.rejects(pool.issue(request('late')), closedError);
  });
});

test('answers a worker sent before dying are delivered; only what it still held fails', TIMEOUT, async () => {
  await withoutUnhandledRejections(async () => {
    const log = capturedLog();
    const pool = new LeafIssuerPool({ signer, size: 1, logger: log.logger, workerModule: CRASHING_WORKER });
    try {
      // Two batches queued on the worker in two turns: the first is answered, the second kills it.
      const first = Array.from({ length: 20 }, (_, i) => pool.issue(request(`first${i}`)));
      await new Promise((resolve) => setImmediate(resolve));
      const second = [pool.issue(request('crash-exit')), pool.issue(request('z'))];
      const [a, b] = await Promise.all([Promise.allSettled(first), Promise.allSettled(second)]);
      assert.ok(a.every((s) => s.status === 'fulfilled'), JSON.stringify(a.map((s) => s.status)));
      assertIssuedByRoot(a.map((s) => (s as PromiseFulfilledResult<IssuedLeaf>).value));
      assert.ok(b.every((s) => s.status === 'rejected' && workerError(s.reason)));
      assert.equal(log.lines[0]?.failedRequests, 2);
    } finally {
      await pool.close();
    }
  });
});

test('a worker that dies at start is respawned a bounded number of times, then requests fail at once', TIMEOUT, async () => {
  await withoutUnhandledRejections(async () => {
    const size = 2;
    const log = capturedLog();
    const pool = new LeafIssuerPool({ signer, size, logger: log.logger, workerModule: DEAD_AT_START_WORKER });
    try {
      // Taken before any worker has died: it still settles, with the coded error.
      await assert.rejects(pool.issue(request('early')), workerError);

      // Each slot: the first worker and MAX_RESPAWNS replacements die, then the slot is given up.
      const deaths = size * (1 + MAX_RESPAWNS);
      // Workers holding no request are unref'd (a pool never keeps a process alive on its own),
      // so something must keep this test's event loop running while they start and die.
      const keepAlive = setInterval(() => {}, 1000);
      try {
        await log.until(deaths);
      } finally {
        clearInterval(keepAlive);
      }
      assert.equal(pool.liveWorkers, 0); // nothing is left that could die (or log) later
      assert.equal(log.lines.length, deaths);
      assert.ok(log.lines.every((l) => /cannot start/.test(l.reason)), JSON.stringify(log.lines));
      assert.equal(log.lines.filter((l) => l.level === 'warn').length, size * MAX_RESPAWNS);
      const givenUp = log.lines.filter((l) => l.level === 'error');
      assert.deepEqual(givenUp.map((l) => l.deathsInARow), [MAX_RESPAWNS + 1, MAX_RESPAWNS + 1]);
      assert.equal(givenUp.at(-1)?.liveWorkers, 0);

      await assert.rejects(pool.issue(request('later')), (e: unknown) => workerError(e) && /no leaf workers left/.test((e as Error).message));
      const many = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => pool.issue(request(`many${i}`))));
      assert.ok(many.every((s) => s.status === 'rejected' && workerError(s.reason)));
      assert.equal(pool.pending, 0);
      pool.setSigner(signer); // no workers to tell; still fine
    } finally {
      await pool.close();
    }
    await assert.rejects(pool.issue(request('closed')), closedError);
  });
});

test('close() after a crash resolves; close({drainMs}) returns once a crash has settled what it was waiting for', TIMEOUT, async () => {
  await withoutUnhandledRejections(async () => {
    const crashed = new LeafIssuerPool({ signer, size: 2, logger: capturedLog().logger, workerModule: CRASHING_WORKER });
    await assert.rejects(crashed.issue(request('crash-throw')), workerError);
    await crashed.close();
    assert.equal(crashed.liveWorkers, 0);
    await assert.rejects(crashed.issue(request('after-close')), closedError);

    // The drain would wait a minute (past this test's timeout) if the crash did not count as an answer.
    const draining = new LeafIssuerPool({ signer, size: 1, logger: capturedLog().logger, workerModule: CRASHING_WORKER });
    const held = Promise.allSettled([draining.issue(request('crash-exit')), draining.issue(request('w'))]);
    await new Promise((resolve) => setImmediate(resolve)); // the batch is on the worker
    await draining.close({ drainMs: 120_000 });
    const settled = await held;
    assert.ok(settled.every((s) => s.status === 'rejected' && workerError(s.reason)), JSON.stringify(settled));
    assert.equal(draining.pending, 0);
  });
});
