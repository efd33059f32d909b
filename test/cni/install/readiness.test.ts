/**
 * install-cni's /readyz answers from the state its loop keeps: the loop re-checks the host files
 * when a watch event wakes it and after each install pass, and the probe only reads the answer.
 * The daemon runs in-process on a FakeClock (its debounce and resync never pass unless the test
 * moves time), with real fs.watch events and the real ops server; the test follows it through
 * its log lines, never through real-time sleeps.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { FakeClock } from '../../support/fake-clock.js';
import { createLogger } from '../../../src/core/log.js';
import { startOpsServer } from '../../../src/ops/ops-server.js';
import { InstallDaemon, chainState, loadInstallConfig } from '../../../src/cni/install/index.js';
import { fixedShutdownAdvisor } from '../../../src/cni/install/shutdown-advisor.js';
import { CONFORMANCE, makeHostTree, treeEnv } from './host-tree.js';

const PRIMARY = '10-calico.conflist';
const DEBOUNCE_MS = 50;

/** Log records as the daemon writes them, with a way to wait for the n-th of a message. */
class LogTap {
  readonly records: Array<Record<string, unknown>> = [];
  #waiters: Array<{ msg: string; count: number; resolve: () => void }> = [];

  readonly sink = (line: string): void => {
    this.records.push(JSON.parse(line) as Record<string, unknown>);
    const due = this.#waiters.filter((w) => this.count(w.msg) >= w.count);
    this.#waiters = this.#waiters.filter((w) => !due.includes(w));
    for (const w of due) w.resolve();
  };

  count(msg: string): number {
    return this.records.filter((r) => r.msg === msg).length;
  }

  last(msg: string): Record<string, unknown> | undefined {
    return this.records.filter((r) => r.msg === msg).at(-1);
  }

  /** Resolves once `msg` has been logged `count` times in all. */
  until(msg: string, count: number): Promise<void> {
    if (this.count(msg) >= count) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ msg, count, resolve }));
  }
}

test('readiness flips when our entry is taken out of the conflist and comes back after the loop re-chains it', { timeout: 60_000 }, async (t) => {
  const tree = makeHostTree();
  t.after(() => tree.cleanup());
  const original = readFileSync(CONFORMANCE + 'list.conflist', 'utf8');
  writeFileSync(join(tree.netDir, PRIMARY), original, { mode: 0o644 });
  const config = loadInstallConfig(treeEnv(tree));
  
  const clock = new FakeClock();
  const logs = new LogTap();
  const logger = createLogger({ level: 'debug', sink: logs.sink });
  const registry = new Registry();
  const daemon = new InstallDaemon({ config, logger, clock, registry, shutdownAdvisor: fixedShutdownAdvisor({ action: 'keep', reason: 'test' }), debounceMs: DEBOUNCE_MS });
  const ops = await startOpsServer({ host: '127.0.0.1', port: 0, registry, readiness: [{ name: 'cni-plugin-installed', check: () => daemon.readinessProblem() }], liveness: [], logger });
  t.after(() => ops.close());
  const chained = () => chainState(JSON.parse(readFileSync(join(tree.netDir, PRIMARY), 'utf8')), daemon.installer.pluginEntry, PRIMARY);
  const probe = async () => {
    const res = await fetch(`http://127.0.0.1:${ops.port}/readyz`);
    return { status: res.status, body: await res.text() };
  };
  const abort = new AbortController();
  const running = daemon.run(abort.signal);
  t.after(async () => {
    abort.abort();
    await running;
  });

  /** Lets the held passes run until the loop rests (no pass queued behind the debounce). */
  const settle = async () => {
    do {
      await clock.waitForTimers(2); // the resync and a debounce
      const passes = logs.count('install pass done');
      await clock.advance(DEBOUNCE_MS);
      await logs.until('install pass done', passes + 1);
    } while (clock.pendingTimers >= 2);
  };

  // Before the first pass: not ready, and the probe says why.
  await clock.waitForTimers(2);
  assert.match((await probe()).body, /not installed yet/);
  assert.equal((await probe()).status, 503);
  // Events of our own writes wake the loop again; it settles once they are all seen.
  await settle();
  assert.equal(logs.count('install-cni ready'), 1);
  assert.equal(chained(), 'installed');
  assert.equal((await probe()).status, 200);

  // The primary CNI rewrites its config without our entry (atomically, as CNIs do). The watch
  // event wakes the loop, which re-checks at once: not ready while the re-chain waits for the
  // debounce, however often it is probed.
  writeFileSync(join(tree.netDir, `.${PRIMARY}.new`), original, { mode: 0o644 });
  renameSync(join(tree.netDir, `.${PRIMARY}.new`), join(tree.netDir, PRIMARY));
  await logs.until('install-cni not ready', 1);
  assert.match(String(logs.last('install-cni not ready')!.reason), /istio-cni entry missing in 10-calico\.conflist/);
  for (let i = 0; i < 3; i++) {
    const r = await probe();
    assert.equal(r.status, 503);
    assert.match(r.body, /istio-cni entry missing in 10-calico\.conflist/);
  }
  assert.match(await registry.getSingleMetricAsString('certbroker_install_cni_ready'), /certbroker_install_cni_ready 0/);
  assert.notEqual(chained(), 'installed', 'nothing re-chained while time stands still');

  // Time moves: the pass re-chains, and readiness comes back from the re-check after it.
  await clock.advance(DEBOUNCE_MS);
  await logs.until('install-cni ready', 2);
  assert.equal(logs.count('CNI config lost our entry; re-inserted'), 1);
  assert.equal(chained(), 'installed');
  assert.equal((await probe()).status, 200);
  assert.match(await registry.getSingleMetricAsString('certbroker_install_cni_ready'), /certbroker_install_cni_ready 1/);
});
