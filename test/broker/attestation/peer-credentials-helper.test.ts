/**
 * The long-lived SO_PEERCRED helper (attestation/peer-credentials-helper.ts) and its fallback to
 * the Perl-per-batch way (peer-credentials-fallback.ts): real Unix sockets, the real core Perl,
 * descriptors really passed over Node's IPC channel. The helper is paused (SIGSTOP) or killed
 * (SIGKILL) to make it slow or dead; deadlines and restart intervals run on a FakeClock.
 * Processes in pod cgroups through the helper: real-cgroups.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import {
  helperProgram,
  PeerCredentialsHelper,
  PeerCredentialsWithFallback,
  PerlPeerCredentials,
  type PeerCredentialsHelperOptions,
} from '../../../src/broker/attestation/index.js';
import { BrokerError } from '../../../src/broker/index.js';
import { FakeClock } from '../../support/fake-clock.js';
import { eventually } from '../support/eventually.js';
import { Scratch } from '../../support/scratch.js';

const supported = 'program' in helperProgram(process.arch) ? undefined : `no helper for ${process.arch} (the fallback serves it)`;

/** A Unix socket server; `pair()` connects a client and returns both ends. */
async function socketServer(t: { after(fn: () => unknown): void }): Promise<{ pair(): Promise<{ client: Socket; accepted: Socket }>; dir: string }> {
  const dir = Scratch.forTest(t as Parameters<typeof Scratch.forTest>[0], 'cb-helper-').dir;
  const path = join(dir, 's.sock');
  const waiting: Array<(s: Socket) => void> = [];
  const open = new Set<Socket>();
  const server: Server = createServer((s) => {
    s.on('error', () => undefined);
    open.add(s);
    waiting.shift()?.(s);
  });
  await new Promise<void>((r) => server.listen(path, r));
  t.after(async () => {
    for (const s of open) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return {
    dir,
    async pair() {
      const accepted = new Promise<Socket>((r) => waiting.push(r));
      const client = connect(path);
      client.on('error', () => undefined);
      open.add(client);
      return { client, accepted: await accepted };
    },
  };
}

function helper(t: { after(fn: () => unknown): void }, options: PeerCredentialsHelperOptions = {}): PeerCredentialsHelper {
  const h = new PeerCredentialsHelper(options);
  t.after(() => h.stop());
  return h;
}

const fdCount = (pid: number | 'self') => readdirSync(`/proc/${pid}/fd`).length;

async function rejection(p: Promise<unknown>): Promise<BrokerError> {
  const err = await p.then(
    () => assert.fail('expected a refusal'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof BrokerError, String(err));
  return err;
}

test('300 connections, one helper: each answered with the PID that connected; no descriptor left behind in the broker or the helper', { skip: supported }, async (t) => {
  const srv = await socketServer(t);
  const h = helper(t);
  const warm = await srv.pair();
  assert.equal((await h.read(warm.accepted)).pid, process.pid);
  warm.client.destroy();
  warm.accepted.destroy();
  const [brokerFds, helperFds] = [fdCount('self'), fdCount(h.pid!)];
  for (let round = 0; round < 30; round++) {
    const pairs = await Promise.all(Array.from({ length: 10 }, () => srv.pair()));
    const creds = await Promise.all(pairs.map((p) => h.read(p.accepted)));
    for (const c of creds) assert.deepEqual(c, { pid: process.pid, uid: process.getuid!(), gid: process.getgid!() });
    for (const p of pairs) {
      p.client.destroy();
      p.accepted.destroy();
    }
  }
  assert.equal(h.starts, 1, 'one helper served them all');
  assert.equal(h.outstanding, 0);
  assert.equal(fdCount(h.pid!), helperFds, 'the helper closed every descriptor it was given');
  assert.equal(fdCount('self'), brokerFds, 'the broker holds no more descriptors than before');
});

test('a connection closed before it is read: ERR_PEER_CLOSED, nothing sent; one closed right after it was handed over is still read (the helper holds its own copy)', { skip: supported }, async (t) => {
  const srv = await socketServer(t);
  const h = helper(t);
  const gone = await srv.pair();
  gone.client.destroy();
  gone.accepted.destroy();
  assert.equal((await rejection(h.read(gone.accepted))).code, 'ERR_PEER_CLOSED');
  assert.equal(h.starts, 0, 'no helper was needed');

  const pairs = await Promise.all(Array.from({ length: 20 }, () => srv.pair()));
  const reads = pairs.map((p) => h.read(p.accepted));
  for (const p of pairs) {
    p.client.destroy();
    p.accepted.destroy();
  }
  for (const r of await Promise.allSettled(reads)) {
    if (r.status === 'fulfilled') assert.equal(r.value.pid, process.pid, 'never another socket\'s peer');
    else assert.ok(r.reason instanceof BrokerError && ['ERR_PEER_CLOSED', 'ERR_ATTESTATION_UNAVAILABLE'].includes(r.reason.code), String(r.reason));
  }
  const after = await srv.pair();
  assert.equal((await h.read(after.accepted)).pid, process.pid, 'the helper still serves');
  assert.equal(h.starts, 1);
});

test('the helper dies with reads outstanding: they fail naming it, the next read starts another helper', { skip: supported }, async (t) => {
  const srv = await socketServer(t);
  const exits: Array<{ reason: string; held: number }> = [];
  const h = helper(t, { restartIntervalMs: 0, observer: { exited: (reason, held) => exits.push({ reason, held }) } });
  const first = await srv.pair();
  await h.read(first.accepted);
  const pid = h.pid!;
  process.kill(pid, 'SIGSTOP');
  const pairs = await Promise.all([srv.pair(), srv.pair()]);
  const reads = pairs.map((p) => rejection(h.read(p.accepted)));
  assert.equal(h.outstanding, 2);
  process.kill(pid, 'SIGKILL');
  for (const err of await Promise.all(reads)) {
    assert.equal(err.code, 'ERR_ATTESTATION_UNAVAILABLE');
    assert.match(err.message, /helper exited with SIGKILL/);
  }
  assert.deepEqual(exits.map((e) => e.held), [2]);
  await eventually('a new helper, started without waiting for a read', () => (h.pid !== undefined && h.pid !== pid ? true : undefined));
  const again = await srv.pair();
  assert.equal((await h.read(again.accepted)).pid, process.pid);
  assert.equal(h.starts, 2);
  assert.notEqual(h.pid, pid);
});

test('deadline per read: a stuck helper fails its read at the deadline and is replaced; the queue is bounded', { skip: supported }, async (t) => {
  const srv = await socketServer(t);
  const clock = new FakeClock();
  const h = helper(t, { clock, timeoutMs: 2000, maxOutstanding: 2, restartIntervalMs: 0 });
  const first = await srv.pair();
  await h.read(first.accepted);
  clock.advance(0);
  const pid = h.pid!;
  process.kill(pid, 'SIGSTOP');
  const [a, b, c] = await Promise.all([srv.pair(), srv.pair(), srv.pair()]);
  const stuck = rejection(h.read(a.accepted));
  const second = rejection(h.read(b.accepted));
  const full = await rejection(h.read(c.accepted));
  assert.equal(full.code, 'ERR_ATTESTATION_UNAVAILABLE');
  assert.match(full.message, /2 connections already wait .*at most 2/);
  await clock.waitForTimers(2);
  await clock.advance(2000);
  assert.match((await stuck).message, /did not answer within 2000 ms/);
  assert.match((await second).message, /did not answer within 2000 ms|killed: a read waited 2000 ms/);
  assert.equal((await h.read(c.accepted)).pid, process.pid, 'a new helper serves the next read');
  assert.equal(h.starts, 2);
});

test('fallback: no helper for the architecture, or no perl for it -> batch mode, with the reason; reads still answered', async (t) => {
  const srv = await socketServer(t);
  for (const [options, reason] of [
    [{ arch: 'mips' }, /no recvmsg syscall number known for architecture mips/],
    [{ perl: '/nonexistent/perl' }, /ENOENT|exited/],
  ] as const) {
    const modes: Array<[string, string | undefined]> = [];
    const peers = new PeerCredentialsWithFallback(helper(t, options), new PerlPeerCredentials(), { observer: { mode: (m, r) => modes.push([m, r]) } });
    assert.equal(await peers.start(srv.dir), 'batch');
    assert.equal(modes.length, 1);
    assert.equal(modes[0]![0], 'batch');
    assert.match(modes[0]![1] ?? '', reason);
    const p = await srv.pair();
    assert.equal((await peers.read(p.accepted)).pid, process.pid);
  }
});

test('fallback: in helper mode, reads the dead helper held and reads during its restart interval are answered by the batch Perl', { skip: supported }, async (t) => {
  const srv = await socketServer(t);
  const clock = new FakeClock();
  const fellBack: string[] = [];
  const batch = new PerlPeerCredentials();
  const h = helper(t, { clock, restartIntervalMs: 1000 });
  const peers = new PeerCredentialsWithFallback(h, batch, { observer: { fellBack: (r) => fellBack.push(r) } });
  assert.equal(await peers.start(srv.dir), 'helper');
  const pid = h.pid!;
  process.kill(pid, 'SIGSTOP');
  const held = await srv.pair();
  const read = peers.read(held.accepted);
  await new Promise((r) => setImmediate(r));
  process.kill(pid, 'SIGKILL');
  assert.equal((await read).pid, process.pid, 'answered by the fallback');
  assert.match(fellBack[0] ?? '', /exited with SIGKILL/);
  const during = await srv.pair();
  assert.equal((await peers.read(during.accepted)).pid, process.pid);
  assert.match(fellBack[1] ?? '', /restarting/);
  assert.equal(h.starts, 1, 'no restart within the interval');
  const runs = batch.runs;
  await clock.advance(1000);
  const later = await srv.pair();
  assert.equal((await peers.read(later.accepted)).pid, process.pid);
  assert.equal(h.starts, 2, 'the helper again after the interval');
  assert.equal(batch.runs, runs);
  const closed = await srv.pair();
  closed.accepted.destroy();
  assert.equal((await rejection(peers.read(closed.accepted))).code, 'ERR_PEER_CLOSED', 'a closed connection does not fall back');
});

/**
 * A broker-like process: it starts the helper, and on SIGINT (a terminal's Ctrl-C reaches its whole
 * process group) attests one more connection through it, as the drain would, and prints the answer.
 */
const CTRL_C_PROGRAM = `
import { createServer, connect } from 'node:net';
const { PeerCredentialsHelper } = await import(process.env.ATTESTATION_MODULE);
const exits = [];
const h = new PeerCredentialsHelper({ observer: { exited: (reason) => exits.push(reason) } });
const accepted = [];
const server = createServer((s) => accepted.shift()?.(s));
await new Promise((r) => server.listen(process.env.SOCKET_PATH, r));
const attest = async () => {
  const s = new Promise((r) => accepted.push(r));
  const client = connect(process.env.SOCKET_PATH);
  try { return (await h.read(await s)).pid; } finally { client.destroy(); }
};
process.on('SIGINT', async () => {
  const after = await attest().catch((e) => String(e.code ?? e));
  const starts = h.starts;
  h.stop();
  console.log(JSON.stringify({ after, starts, exits }));
  process.exit(0);
});
console.log(JSON.stringify({ ready: await attest() }));
`;

test('Ctrl-C: a SIGINT to the broker\'s process group leaves the helper serving the drain (it runs in a session of its own); stop() is not reported as an exit', { skip: supported }, async (t) => {
  const dir = Scratch.forTest(t, 'cb-helper-int-').dir;
  const child = spawn(process.execPath, ['--input-type=module', '-e', CTRL_C_PROGRAM], {
    detached: true,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, SOCKET_PATH: join(dir, 's.sock'), ATTESTATION_MODULE: new URL('../../../src/broker/attestation/index.js', import.meta.url).href },
  });
  t.after(() => child.exitCode === null && child.kill('SIGKILL'));
  const lines: string[] = [];
  child.stdout!.setEncoding('utf8').on('data', (d: string) => lines.push(...d.split('\n').filter((l) => l !== '')));
  const line = (n: number) => eventually(`line ${n} from the broker-like process`, () => lines[n]);
  assert.deepEqual(JSON.parse(await line(0)), { ready: child.pid });
  process.kill(-child.pid!, 'SIGINT');
  assert.deepEqual(JSON.parse(await line(1)), { after: child.pid, starts: 1, exits: [] });
});

test('helpers that end without answering, one after another, are restarted ever later (the interval doubles)', async (t) => {
  const clock = new FakeClock();
  const exits: string[] = [];
  // `false` ignores the program and exits 1 at once: a helper that never answers.
  const h = helper(t, { perl: '/bin/false', clock, restartIntervalMs: 1000, observer: { exited: (reason) => exits.push(reason) } });
  h.launch();
  const exited = (n: number) => eventually(`${n} exits`, () => (exits.length >= n && h.pid === undefined ? true : undefined));
  await exited(1);
  assert.match(exits[0]!, /exited with 1/);
  await clock.advance(1000);
  assert.equal(h.starts, 2, 'restarted after the interval, with no read');
  await exited(2);
  await clock.advance(1000);
  assert.equal(h.starts, 2, 'a second barren helper in a row: twice the interval');
  assert.equal(h.available, false);
  await clock.advance(1000);
  assert.equal(h.starts, 3);
  await exited(3);
  await clock.advance(3999);
  assert.equal(h.starts, 3, 'then four times');
  await clock.advance(1);
  assert.equal(h.starts, 4);
  h.stop();
  await clock.advance(60_000);
  assert.equal(h.starts, 4, 'none after stop');
});
