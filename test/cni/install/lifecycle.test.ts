/**
 * install-cni's daemon has the shared lifecycle shape (src/core/long-lived.ts): `start(signal)`
 * resolves while the loop runs, `stop(deadlineMs)` ends it and resolves once the shutdown is done
 * or at the deadline (a hung upgrade check does not hold it), and a stop before the start leaves
 * the host untouched. In-process on a FakeClock and a temp host tree.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { FakeClock } from '../../support/fake-clock.js';
import { createLogger } from '../../../src/core/log.js';
import type { LongLived } from '../../../src/core/long-lived.js';
import { InstallDaemon, loadInstallConfig } from '../../../src/cni/install/index.js';
import { fixedShutdownAdvisor, type ShutdownAdvisor } from '../../../src/cni/install/shutdown-advisor.js';
import { CONFORMANCE, makeHostTree, treeEnv } from './host-tree.js';

const PRIMARY = '10-calico.conflist';

function daemonOn(t: { after(fn: () => unknown): void }, advisor: ShutdownAdvisor, logs: string[] = []) {
  const tree = makeHostTree();
  t.after(() => tree.cleanup());
  writeFileSync(join(tree.netDir, PRIMARY), readFileSync(CONFORMANCE + 'list.conflist', 'utf8'), { mode: 0o644 });
  const clock = new FakeClock();
  const logger = createLogger({ level: 'debug', sink: (l) => logs.push(l) });
  const daemon = new InstallDaemon({ config: loadInstallConfig(treeEnv(tree)), logger, clock, registry: new Registry(), shutdownAdvisor: advisor, debounceMs: 50 });
  return { tree, clock, daemon };
}

test('start(signal) resolves while the loop runs; an abort of the signal stops it and the shutdown follows', async (t) => {
  const logs: string[] = [];
  const { clock, daemon } = daemonOn(t, fixedShutdownAdvisor({ action: 'keep', reason: 'test' }), logs);
  const part: LongLived = daemon;
  const ac = new AbortController();
  await part.start(ac.signal);
  await clock.waitForTimers(2); // the resync and the first debounce: the loop is running
  assert.notEqual(daemon.phase, 'stopped');
  ac.abort();
  await daemon.stopped;
  assert.equal(daemon.phase, 'stopped');
  assert.equal(daemon.readinessProblem(), 'stopped');
  assert.ok(logs.some((l) => l.includes('leaving the plugin installed')), 'the shutdown ran');
  await part.stop(); // again: nothing left to do
});

test('stop(deadlineMs) resolves at the deadline when the upgrade check hangs; the loop has stopped', async (t) => {
  let asked = 0;
  const hung: ShutdownAdvisor = {
    decide: () => {
      asked++;
      return new Promise(() => undefined);
    },
  };
  const { clock, daemon } = daemonOn(t, hung);
  await daemon.start();
  await clock.waitForTimers(2);
  await daemon.stop(20);
  assert.equal(asked, 1, 'the shutdown began');
  assert.equal(daemon.phase, 'stopped');
  assert.equal(clock.pendingTimers, 0, 'no loop timer left armed');
});

test('stop() before start(): start does nothing, nothing is installed and nothing uninstalled', async (t) => {
  let asked = 0;
  const advisor: ShutdownAdvisor = { decide: async () => (asked++, { action: 'uninstall', reason: 'test' }) };
  const { tree, daemon } = daemonOn(t, advisor);
  await daemon.stop();
  await daemon.start();
  await daemon.stopped;
  assert.equal(asked, 0, 'no shutdown for a daemon that never ran');
  assert.equal(existsSync(join(tree.binDir, 'istio-cni')), false);
  assert.equal(daemon.phase, 'starting');
});
