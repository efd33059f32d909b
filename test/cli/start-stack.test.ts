/**
 * `certbroker start --duration-seconds N` stops by itself and exits 0 — also when garbage
 * collection runs often (the process is started with --expose-gc and collects every 250 ms),
 * which is what made a timeout signal inside `AbortSignal.any()` vanish and the stack run on.
 * The whole stack runs for real: devcluster, CA, broker, sample pods, consumer. And its live view
 * shows the broker's three fronts and what a sample client of each received on the front's real
 * socket: the Broker API consumer (UDS + mTLS), the Workload API client (its own process in pod
 * shop/cart-0's cgroup: the serial of the broker's shared cart entry; without root or cgroup v2
 * the view says why instead), and the ztunnel-like Istio CA client (its own keys: serials the
 * broker's cache does not hold).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { abortAfter, runLocalStack } from '../../src/cli/start-stack.js';
import { KubeletCgroups } from '../../src/cli/kube-cgroups.js';
import { podCgroupProblem } from '../../src/cli/stack-clients.js';
import { emptyView, received } from '../../src/cli/stack-sample-view.js';
import { tempDirSync } from '../support/scratch.js';

const START = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'start.js');
// The subcommand module on its own (as main.ts mounts it), so other subcommands do not matter.
// A script file, not `--input-type=module -e`: worker threads inherit execArgv, and the CA's
// signing workers refuse to start with --input-type.
const SCRIPT = `
  setInterval(() => globalThis.gc(), 250).unref();
  const { command } = await import(${JSON.stringify(START)});
  await command().parseAsync(process.argv.slice(2), { from: 'user' });
`;

test('--duration-seconds 2 ends the stack cleanly with exit code 0, under frequent GC', async () => {
  const dir = tempDirSync('start-stack-test-');
  const script = join(dir, 'start.mjs');
  await writeFile(script, SCRIPT);
  const child = spawn(process.execPath, ['--expose-gc', script, '--duration-seconds', '2', '--interval-ms', '200'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'error' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  // A hang guard only (the stack is up in a few seconds): a stack that never stops fails here.
  const guard = setTimeout(() => child.kill('SIGKILL'), 90_000);
  const [code, sig] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  clearTimeout(guard);
  await rm(dir, { recursive: true, force: true });
  assert.equal(sig, null, `the stack did not stop by itself; last output:\n${stdout.slice(-600)}\n${stderr.slice(-600)}`);
  assert.equal(code, 0, stderr.slice(-2000));
  assert.match(stdout, /node broker for node-1/);
  assert.match(stdout, /stopped: consumer, broker, CA and devcluster are down\.\n$/);
});

test('abortAfter: follows the parent signal, fires on its own deadline, and dispose() disarms it', async () => {
  const parent = new AbortController();
  const a = abortAfter(parent.signal, 60_000, 'deadline');
  parent.abort(new Error('stop'));
  assert.equal(a.signal.aborted, true);
  assert.equal((a.signal.reason as Error).message, 'stop');
  a.dispose();

  const b = abortAfter(new AbortController().signal, 1, 'deadline');
  await new Promise<void>((resolve) => b.signal.addEventListener('abort', () => resolve(), { once: true }));
  assert.equal((b.signal.reason as Error).message, 'deadline');
  b.dispose();

  const already = new AbortController();
  already.abort(new Error('before'));
  const c = abortAfter(already.signal, 60_000, 'deadline');
  assert.equal((c.signal.reason as Error).message, 'before');
  c.dispose();
});

/** The rows of the table under the line starting with `title` (until the next blank line), by first column. */
function table(view: string, title: string): Map<string, string[]> {
  const lines = view.split('\n');
  const at = lines.findIndex((l) => l.startsWith(title));
  assert.ok(at >= 0, `no section ${title} in:\n${view}`);
  const rows = new Map<string, string[]>();
  for (const line of lines.slice(at + 2)) {
    if (line.trim() === '') break;
    const cols = line.trim().split(/\s+/u);
    rows.set(cols[0]!, cols);
  }
  return rows;
}

test('the live view shows the three fronts and a sample client of each, with what it received on the real socket', async () => {
  const views: string[] = [];
  const stop = new AbortController();
  const hexSerial = /^[0-9a-f]{8}$/u;
  const complete = (v: string) => {
    if (!v.includes('Istio CA client like ztunnel')) return false;
    const issued = table(v, 'Istio CA client like ztunnel');
    const consumer = table(v, 'Broker API client');
    const workloadDone = podCgroupProblem() !== undefined || (table(v, 'Workload API client').get('/ns/shop/sa/cart')?.[1] ?? '-') !== '-';
    return workloadDone && [...issued.values(), ...consumer.values()].every((r) => hexSerial.test(r[1] ?? ''));
  };
  // A hang guard only: the stack is up and every client served within seconds.
  const guard = setTimeout(() => stop.abort(new Error('the view never showed every sample client served')), 90_000);
  const run = runLocalStack({
    certTtlSeconds: 300,
    durationSeconds: 0,
    intervalMs: 100,
    signal: stop.signal,
    print: (text) => {
      views.push(text);
      if (complete(text)) stop.abort();
    },
  });
  await run;
  clearTimeout(guard);
  const view = views.findLast((v) => complete(v));
  assert.ok(view, `no complete view; last one:\n${views.at(-2) ?? ''}`);
  assert.match(view, /^ {2}Broker API {6}unix:\/\/\S+broker\.sock \(mTLS/mu);
  assert.match(view, /^ {2}Workload API {4}unix:\/\/\S+workload-api\/socket \(callers attested from the kernel/mu);
  assert.match(view, /^ {2}Istio CA front {2}https:\/\/127\.0\.0\.1:\d+ \(TLS as localhost; serving cert [0-9a-f]{8}, expires in/mu);
  const broker = table(view, 'IDENTITY ');
  const cartSerial = broker.get('/ns/shop/sa/cart')?.[2];
  assert.match(cartSerial ?? '', hexSerial);
  // Broker API: each node-1 pod's stream delivered its identity's entry of the shared cache.
  const consumer = table(view, 'Broker API client');
  assert.deepEqual([...consumer.keys()].sort(), ['bank/ledger-0', 'shop/cart-0', 'shop/cart-1', 'shop/web-0']);
  assert.equal(consumer.get('shop/cart-0')?.[1], cartSerial);
  // Workload API: attested from the kernel as pod shop/cart-0 -> the same shared entry; or the reason it cannot run here.
  const problem = podCgroupProblem();
  if (problem === undefined) {
    assert.match(view, /^Workload API client, FetchX509SVID: pid \d+ in the cgroup of pod shop\/cart-0 \(\/kubepods\.slice\//mu);
    const workload = table(view, 'Workload API client');
    assert.deepEqual([...workload.keys()], ['/ns/shop/sa/cart']);
    assert.equal(workload.get('/ns/shop/sa/cart')?.[1], cartSerial);
    // Stopped: the container cgroup the client ran in (src/cli/kube-cgroups.ts) is removed with it.
    const scope = /in the cgroup of pod shop\/cart-0 \((\/kubepods\.slice\/\S+\.scope)\)/u.exec(view)?.[1];
    assert.ok(scope && existsSync(join(KubeletCgroups.v2()!.root, dirname(scope))) === false, `pod cgroup ${scope} removed`);
  } else {
    assert.ok(view.includes(`Workload API client, FetchX509SVID: not run: ${problem}`), view);
  }
  // Istio CA front: ztunnel's own SVID and an impersonated one, each for the client's own key (not the cache's).
  const issued = table(view, 'Istio CA client like ztunnel');
  assert.deepEqual([...issued.keys()].sort(), ['/ns/istio-system/sa/ztunnel', '/ns/shop/sa/cart']);
  assert.notEqual(issued.get('/ns/shop/sa/cart')?.[1], cartSerial);
  assert.match(view, /through the front as istio-system\/ztunnel \(token bound to pod ztunnel-node-1\)/u);
  assert.match(views.at(-1)!, /stopped: consumer, broker, CA and devcluster are down\./u);
});

test("a sample client's last rotation is when its serial changed, not when a message repeated it", () => {
  const v = emptyView();
  received(v, 'aa', 1000, 10);
  assert.deepEqual([v.serial, v.messages, v.lastRotationAt], ['aa', 1, undefined], 'the first certificate is no rotation');
  received(v, 'aa', 1000, 20);
  assert.equal(v.lastRotationAt, undefined, 'the same certificate again');
  v.problem = 'ended';
  received(v, 'bb', 2000, 30);
  assert.deepEqual([v.serial, v.notAfter, v.messages, v.lastRotationAt, v.problem], ['bb', 2000, 3, 30, undefined]);
});
