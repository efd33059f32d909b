/**
 * The packaged binaries (scripts/build-sea.mjs): Node single executable applications that run
 * from any directory with no Node.js on PATH and no node_modules next to them, as install-cni
 * copies them to /opt/cni/bin.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, openSync, readSync, closeSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { execPlugin } from '../../support/cni-runner.js';
import { seaBinaries, type SeaBinaries } from '../../support/sea-binary.js';
import { tempDirSync } from '../../support/scratch.js';

let bins: SeaBinaries;
let bare = '';
/** A PATH with the iptables tools but without the directory node lives in. */
const NO_NODE_PATH = '/usr/sbin:/sbin';

before(async () => {
  bins = await seaBinaries();
  if (bins.buildMs > 0) process.stdout.write(`# built the single executables in ${bins.buildMs} ms\n`);
  bare = tempDirSync('cni-bin-');
  copyFileSync(bins.istioCni, join(bare, 'istio-cni'));
  copyFileSync(bins.istioIptables, join(bare, 'istio-iptables'));
});

after(() => rmSync(bare, { recursive: true, force: true }));

function elfHeader(path: string): string {
  const fd = openSync(path, 'r');
  const b = Buffer.alloc(4);
  readSync(fd, b, 0, 4, 0);
  closeSync(fd);
  return b.toString('latin1');
}

test('both binaries are executables carrying the Node runtime', () => {
  for (const name of ['istio-cni', 'istio-iptables']) {
    const p = join(bare, name);
    assert.equal(elfHeader(p), '\x7fELF', name);
    assert.ok(statSync(p).size > 50 * 1024 * 1024, `${name} embeds the runtime`);
  }
});

test('istio-cni runs without Node.js on PATH: VERSION, and a CNI error for bad input', async () => {
  const v = await execPlugin({ command: join(bare, 'istio-cni'), env: { PATH: NO_NODE_PATH, CNI_COMMAND: 'VERSION' } });
  assert.equal(v.code, 0, v.stderr);
  assert.equal((JSON.parse(v.stdout) as { supportedVersions: string[] }).supportedVersions.at(-1), '1.1.0');
  const bad = await execPlugin({
    command: join(bare, 'istio-cni'),
    env: { PATH: NO_NODE_PATH, CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'x1', CNI_NETNS: '/x', CNI_IFNAME: 'eth0', CNI_PATH: bare },
    stdin: 'not json',
  });
  assert.equal(bad.code, 1);
  assert.equal((JSON.parse(bad.stdout) as { code: number }).code, 6);
  assert.doesNotMatch(bad.stderr, /ExperimentalWarning|single executable/i, 'no SEA warning on stderr');
});

test('istio-iptables runs without Node.js on PATH and prints its dry-run rules', async () => {
  const o = await execPlugin({
    command: join(bare, 'istio-iptables'),
    args: ['--dry-run', '-p', '15001', '-z', '15006', '-u', '1337', '-m', 'REDIRECT', '-i', '*', '-b', '*'],
    env: { PATH: NO_NODE_PATH },
  });
  assert.equal(o.code, 0, o.stderr);
  assert.match(o.stdout, /^-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001$/m);
  assert.match(o.stdout, /^-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006$/m);
});
