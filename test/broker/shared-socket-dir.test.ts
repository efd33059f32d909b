/**
 * The Workload API socket's directory (adapters/unix-socket.ts, prepareSharedSocketPath): created
 * 0755 whatever the umask, refused when group or others could write it (they could swap the
 * broker's socket for theirs), a stale socket removed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { prepareSharedSocketPath } from '../../src/broker/adapters/index.js';
import { BrokerError } from '../../src/broker/index.js';
import { Scratch } from '../support/scratch.js';

test('missing directories are made 0755 even under umask 077; a stale socket file is removed', (t) => {
  const dir = Scratch.forTest(t, 'cb-shared-sock-').dir;
  const socket = join(dir, 'a', 'b', 'socket');
  const old = process.umask(0o077);
  try {
    prepareSharedSocketPath(socket);
  } finally {
    process.umask(old);
  }
  assert.equal(statSync(join(dir, 'a')).mode & 0o777, 0o755);
  assert.equal(statSync(join(dir, 'a', 'b')).mode & 0o777, 0o755);
  writeFileSync(socket, 'stale');
  prepareSharedSocketPath(socket);
  assert.equal(existsSync(socket), false);
});

test('a directory group or others may write is refused (sticky or not)', (t) => {
  const dir = Scratch.forTest(t, 'cb-shared-sock-').dir;
  for (const mode of [0o777, 0o775, 0o757, 0o1777]) {
    const d = join(dir, mode.toString(8));
    mkdirSync(d);
    chmodSync(d, mode);
    assert.throws(
      () => prepareSharedSocketPath(join(d, 'socket')),
      (e: unknown) => e instanceof BrokerError && e.code === 'ERR_SOCKET_DIR_UNSAFE' && e.message.includes(mode.toString(8).slice(-3)),
      mode.toString(8),
    );
  }
  const ok = join(dir, 'ok');
  mkdirSync(ok);
  chmodSync(ok, 0o750);
  prepareSharedSocketPath(join(ok, 'socket'));
  assert.equal(statSync(ok).mode & 0o777, 0o750, 'an existing directory keeps its mode');
});
