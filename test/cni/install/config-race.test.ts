/**
 * The primary CNI racing the real install-cni daemon (the CLI, as a child process) over the
 * primary config, round after round. Each round the "primary CNI" in this process writes v1,
 * waits a random 0-120 ms and writes v2, each write done one of the ways CNIs do it: temp file +
 * rename, in place (truncate + write), truncate and write after a pause (the file is briefly
 * empty), or delete and write after a pause (briefly absent). One round in three is aimed: v2 is
 * written the moment install-cni's temp file for its own write shows up in the dir, so it lands
 * while install-cni is between its read and its rename (the lost update of issue 10). Aimed v2
 * writes are in place: a writer's *rename* landing in the few microseconds between install-cni's
 * last check and its own rename is the one case a compare-and-swap built on rename(2) cannot see
 * (src/cni/install/cas-file.ts), and aiming at that window would only measure it; unaimed rounds
 * use every method. After each round the test polls the
 * file until it holds v2 with our entry chained exactly once; a round that does not get there is a
 * lost update. Every other file in the config dir (an unrelated `99-loopback.conf`, Calico's
 * kubeconfig) must keep its bytes and inode, and no file may appear but the daemon's own
 * short-lived temps. At the end SIGTERM uninstalls: the primary must hold exactly the bytes the
 * primary CNI last wrote.
 *
 * Randomness is seeded (RACE_SEED, printed) so a failing sequence can be replayed; RACE_ROUNDS
 * (default 200) sets the length, RACE_BUDGET_SECONDS (90) caps it in time, RACE_MAX_BAD (15) stops
 * it early once that many rounds went wrong.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, renameSync, rmSync, statSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chainPlugin, jsonEqual, type JsonValue } from '../../../src/cni/install/index.js';
import { seededRng } from '../../support/seeded-rng.js';
import { DaemonProcess, TREE_ENTRY, makeHostTree, treeEnv, waitFor } from './host-tree.js';

const ROUNDS = Number(process.env.RACE_ROUNDS ?? 200);
const SEED = Number(process.env.RACE_SEED ?? Date.now() % 2 ** 31);
/** Only a guard for a round that never settles (a lost update); a healthy round settles in ~0.1 s. */
const ROUND_DEADLINE_MS = 3_000;
/** Stop early once this many rounds went wrong: the point is made, and the file stays bounded in time. */
const MAX_BAD_ROUNDS = Number(process.env.RACE_MAX_BAD ?? 15);
/** No round starts after this (a loaded machine gets fewer rounds, never a hung file). */
const BUDGET_MS = Number(process.env.RACE_BUDGET_SECONDS ?? 90) * 1000;

const PRIMARY = '10-calico.conflist';

/** Files in the config dir that belong to others and must never change. */
const BYSTANDERS: Readonly<Record<string, string>> = {
  '99-loopback.conf': '{\n  "cniVersion": "1.0.0",\n  "name": "lo",\n  "type": "loopback"\n}\n',
  'calico-kubeconfig': 'apiVersion: v1\nkind: Config\nusers:\n- name: calico\n',
};

/** Seeded draws (test/support/seeded-rng.ts), so a failing round sequence can be replayed. */
function seeded(seed: number): { int(lo: number, hi: number): number; pick<T>(xs: readonly T[]): T } {
  const next = seededRng(seed);
  return {
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (xs) => xs[Math.floor(next() * xs.length)]!,
  };
}

/** What Calico writes, one revision per write; formatted unlike install-cni's output. */
function calicoConfig(revision: string, indent: number): string {
  const value = {
    name: 'k8s-pod-network',
    cniVersion: '0.3.1',
    plugins: [
      {
        type: 'calico',
        datastore_type: 'kubernetes',
        nodename: 'node-a',
        mtu: 1440,
        ipam: { type: 'calico-ipam' },
        policy: { type: 'k8s' },
        kubernetes: { kubeconfig: '/etc/cni/net.d/calico-kubeconfig' },
        revision,
      },
      { type: 'portmap', snat: true, capabilities: { portMappings: true } },
    ],
  };
  return JSON.stringify(value, null, indent) + (indent > 0 ? '\n' : '');
}

type WriteMethod = 'rename' | 'in-place' | 'empty-first' | 'absent-first';
const METHODS: readonly WriteMethod[] = ['rename', 'in-place', 'empty-first', 'absent-first'];
const IN_PLACE_METHODS: readonly WriteMethod[] = ['in-place', 'empty-first'];

interface Snapshot {
  readonly text: string;
  readonly ino: number;
  readonly mtimeMs: number;
}

function snapshot(path: string): Snapshot | undefined {
  try {
    const st = statSync(path);
    return { text: readFileSync(path, 'utf8'), ino: st.ino, mtimeMs: st.mtimeMs };
  } catch {
    return undefined;
  }
}

function parsed(path: string): JsonValue | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as JsonValue;
  } catch {
    return undefined;
  }
}

test('the primary CNI racing install-cni: its latest config always survives, chained once, and no other file is touched', { timeout: 240_000 }, async (t) => {
  t.diagnostic(`seed ${SEED} (RACE_SEED to replay), ${ROUNDS} rounds`);
  const rng = seeded(SEED);
  const tree = makeHostTree();
  t.after(() => tree.cleanup());
  const primary = join(tree.netDir, PRIMARY);
  let last = calicoConfig('initial', 2);
  writeFileSync(primary, last, { mode: 0o644 });
  for (const [name, text] of Object.entries(BYSTANDERS)) writeFileSync(join(tree.netDir, name), text, { mode: 0o644 });
  const bystanders = new Map(Object.keys(BYSTANDERS).map((name) => [name, snapshot(join(tree.netDir, name))!]));

  const daemon = new DaemonProcess(treeEnv(tree, { UNINSTALL_ON_EXIT: 'always', RESYNC_INTERVAL_SECONDS: '2', LOG_LEVEL: 'info' }));
  t.after(() => daemon.stop('SIGKILL'));
  await waitFor(async () => (await daemon.get('/readyz')).status === 200, 'ready', daemon);

  let tempSeq = 0;
  const writeRename = (text: string) => {
    const tmp = join(tree.netDir, `.${PRIMARY}.calico-${tempSeq++}`);
    writeFileSync(tmp, text, { mode: 0o644 });
    renameSync(tmp, primary);
  };
  const write = async (text: string, method: WriteMethod): Promise<void> => {
    switch (method) {
      case 'rename':
        writeRename(text);
        return;
      case 'in-place':
        writeFileSync(primary, text);
        return;
      case 'empty-first':
        writeFileSync(primary, '');
        await sleep(rng.int(0, 80));
        writeFileSync(primary, text);
        return;
      case 'absent-first':
        rmSync(primary, { force: true });
        await sleep(rng.int(0, 80));
        writeRename(text);
        return;
    }
  };

  /** What else is in the dir that should not be: changed bystanders, new or missing files. */
  const damage = (): string[] => {
    const problems: string[] = [];
    for (const [name, before] of bystanders) {
      const now = snapshot(join(tree.netDir, name));
      if (now === undefined) problems.push(`${name} removed`);
      else if (now.text !== before.text || now.ino !== before.ino || now.mtimeMs !== before.mtimeMs) problems.push(`${name} modified or replaced`);
    }
    const allowed = new Set([PRIMARY, ...bystanders.keys()]);
    for (const name of readdirSync(tree.netDir)) {
      if (allowed.has(name) || name.includes('.certbroker-tmp-') || name.startsWith(`.${PRIMARY}.calico-`)) continue;
      problems.push(`${name} appeared`);
    }
    return problems;
  };
  /** Puts the bystanders back after a damaged round, so every round starts the same. */
  const restoreBystanders = () => {
    for (const name of readdirSync(tree.netDir)) {
      if (name !== PRIMARY && !bystanders.has(name) && !name.startsWith('.')) rmSync(join(tree.netDir, name), { force: true });
    }
    for (const name of bystanders.keys()) {
      const now = snapshot(join(tree.netDir, name));
      if (now?.text !== bystanders.get(name)!.text) writeFileSync(join(tree.netDir, name), BYSTANDERS[name]!, { mode: 0o644 });
      bystanders.set(name, snapshot(join(tree.netDir, name))!);
    }
  };

  // Tells a waiting round when install-cni starts a write of the primary (its temp file appears).
  let onDaemonTemp: (() => void) | undefined;
  const watcher = watch(tree.netDir, (_event, file) => {
    if (file !== null && file.startsWith(`.${PRIMARY}.certbroker-tmp-`)) onDaemonTemp?.();
  });
  t.after(() => watcher.close());
  const gapUntilDaemonWrites = async (): Promise<number> => {
    const t0 = Date.now();
    const ac = new AbortController();
    await Promise.race([new Promise<void>((resolve) => (onDaemonTemp = resolve)), sleep(120, undefined, { signal: ac.signal }).catch(() => undefined)]);
    ac.abort();
    onDaemonTemp = undefined;
    return Date.now() - t0;
  };

  const lost: string[] = [];
  const damaged: string[] = [];
  const started = Date.now();
  let rounds = 0;
  for (let round = 0; round < ROUNDS && lost.length + damaged.length < MAX_BAD_ROUNDS && Date.now() - started < BUDGET_MS; round++) {
    rounds++;
    const targeted = rng.int(0, 2) === 0;
    const m1 = rng.pick(METHODS);
    const m2 = rng.pick(targeted ? IN_PLACE_METHODS : METHODS);
    let gap = rng.int(0, 120);
    const v1 = calicoConfig(`r${round}-v1`, rng.pick([0, 2, 4]));
    const v2 = calicoConfig(`r${round}-v2`, rng.pick([0, 2, 4]));
    await write(v1, m1);
    if (targeted) gap = await gapUntilDaemonWrites();
    else await sleep(gap);
    await write(v2, m2);
    last = v2;
    const wanted = chainPlugin(JSON.parse(v2), TREE_ENTRY, PRIMARY);
    const deadline = Date.now() + ROUND_DEADLINE_MS;
    while (!jsonEqual(parsed(primary), wanted) && Date.now() < deadline) await sleep(10);
    const label = `round ${round} (${m1}, ${gap} ms${targeted ? ' until install-cni wrote' : ''}, ${m2})`;
    if (!jsonEqual(parsed(primary), wanted)) {
      const holds = parsed(primary) as { plugins?: Array<{ revision?: string; type?: string }> } | undefined;
      const what = holds?.plugins?.map((p) => p.revision ?? p.type).join(',') ?? 'no valid config';
      lost.push(`${label}: ${PRIMARY} holds [${what}] instead of r${round}-v2 + istio-cni`);
    }
    const problems = damage();
    if (problems.length > 0) {
      damaged.push(`${label}: ${problems.join('; ')}`);
      restoreBystanders();
    }
  }
  t.diagnostic(`${rounds} rounds in ${((Date.now() - started) / 1000).toFixed(1)} s: ${lost.length} lost updates, ${damaged.length} rounds touched other files`);
  const metrics = await daemon.get('/metrics');
  for (const line of metrics.body.split('\n')) {
    if (/^certbroker_install_cni_(config_conflicts|repairs|fight_warnings)_total/.test(line)) t.diagnostic(line);
  }
  assert.deepStrictEqual({ lost, damaged }, { lost: [], damaged: [] }, `seed ${SEED}`);

  // Uninstall: the primary goes back to exactly the bytes the primary CNI last wrote.
  const exit = await daemon.stop('SIGTERM');
  assert.equal(exit.code, 0, daemon.describe());
  assert.equal(readFileSync(primary, 'utf8'), last);
  assert.deepStrictEqual(damage(), []);
  assert.deepStrictEqual(readdirSync(tree.netDir).filter((n) => n.startsWith('.') && !n.startsWith(`.${PRIMARY}.calico-`)), []);
});
