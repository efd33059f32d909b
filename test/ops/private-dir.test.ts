/**
 * Directories the stack creates are owner-only (0700) whatever the umask: the broker's socket
 * directories (through the real CNI registration server), `certbroker fetch --out-dir`,
 * `certbroker certs --out-dir`, the devcluster's kubeconfig directory and `certbroker start`'s
 * scratch directory. Each is made in a child process running under a permissive umask (0) and
 * under one that strips owner bits (0277); a directory that already existed keeps its mode.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from '../support/fixtures.js';
import { Scratch } from '../support/scratch.js';

const mod = (path: string) => JSON.stringify(pathToFileURL(join(REPO_ROOT, 'dist/src', path)).href);

/** Runs under `umask`, makes every directory below `base`, prints { path: mode } as JSON. */
const SCRIPT = `
const [base, umask] = process.argv.slice(2);
process.umask(parseInt(umask, 8));
const { chmodSync, mkdirSync, rmSync, statSync } = await import('node:fs');
const { join } = await import('node:path');
const { ensurePrivateDir, ensurePrivateDirSync } = await import(${mod('ops/private-dir.js')});
const { startRegistrationServer } = await import(${mod('broker/adapters/index.js')});
const { NodePods } = await import(${mod('broker/cache/index.js')});
const { writeSvidFiles } = await import(${mod('broker/client/index.js')});
const { makePluginCaBundle } = await import(${mod('pki/plugin-ca.js')});
const { writeCaCertsDir } = await import(${mod('pki/cacerts-dir.js')});
const { startDevCluster } = await import(${mod('devcluster/index.js')});
const { createStackDir } = await import(${mod('cli/start-stack.js')});
const { silentLogger } = await import(${mod('core/log.js')});

// Someone else's directory, group/world-readable on purpose: it must keep its mode.
const shared = join(base, 'shared');
mkdirSync(shared);
chmodSync(shared, 0o755);

const sync = ensurePrivateDirSync(join(shared, 'sync/a/b'));
const asyncMade = await ensurePrivateDir(join(shared, 'async/a'));

const pods = new NodePods({ nodeName: 'n', trustDomain: 'td', certs: { retain() {}, release() {} }, now: Date.now });
const reg = await startRegistrationServer({ socketPath: join(shared, 'run/istio-cni/pluginevent.sock'), pods, logger: silentLogger, lookup: async () => undefined });
await reg.close();

const bundle = await makePluginCaBundle({ rootSubject: 'O=t, CN=root', caSubject: 'O=t, CN=ca', rootTtlSeconds: 7200, caTtlSeconds: 3600, keyType: 'ec-p256', nowMs: Date.now() });
await writeCaCertsDir(join(shared, 'certs/out'), bundle);
const der = Buffer.from(bundle.rootCertPem.replace(/-----[^-]+-----|\\s/g, ''), 'base64');
await writeSvidFiles(join(shared, 'fetch/out'), { svids: [{ spiffe_id: 'spiffe://td/ns/a/sa/b', x509_svid: der, x509_svid_key: Buffer.from('k'), bundle: der, hint: '' }] });

const dc = await startDevCluster({});
await dc.writeKubeconfig(join(shared, 'devcluster/kube/config'));
await dc.close();

const stack = await createStackDir();
const modes = { stack: statSync(stack).mode & 0o777 };
rmSync(stack, { recursive: true, force: true });
for (const p of ['shared', 'shared/sync', 'shared/sync/a', 'shared/sync/a/b', 'shared/async', 'shared/async/a',
  'shared/run', 'shared/run/istio-cni', 'shared/certs', 'shared/certs/out', 'shared/fetch', 'shared/fetch/out',
  'shared/devcluster', 'shared/devcluster/kube']) modes[p] = statSync(join(base, p)).mode & 0o777;
console.log(JSON.stringify({ modes, sync: sync.map((d) => d.slice(base.length)), asyncMade: asyncMade.map((d) => d.slice(base.length)) }));
`;

async function modesUnder(t: { after(fn: () => unknown): void }, umask: string): Promise<{ modes: Record<string, number>; sync: string[]; asyncMade: string[] }> {
  const s = Scratch.forTest(t, 'cb-private-dir-');
  const script = await s.write('make-dirs.mjs', SCRIPT);
  const base = s.path('tree');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(base);
  const out = await new Promise<{ code: number | null; text: string }>((resolve) => {
    const child = spawn(process.execPath, [script, base, umask], { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.stderr.on('data', (d: Buffer) => (text += d.toString()));
    child.on('exit', (code) => resolve({ code, text }));
  });
  assert.equal(out.code, 0, out.text);
  return JSON.parse(out.text.trim().split('\n').at(-1)!) as { modes: Record<string, number>; sync: string[]; asyncMade: string[] };
}

for (const umask of ['000', '277']) {
  test(`under umask ${umask} every directory the stack creates is 0700; an existing one keeps its mode`, async (t) => {
    const { modes, sync, asyncMade } = await modesUnder(t, umask);
    assert.equal(modes['shared'], 0o755, 'not ours: left as it was');
    const { shared: _shared, ...ours } = modes;
    for (const [path, mode] of Object.entries(ours)) assert.equal(mode.toString(8), '700', path);
    assert.deepEqual(sync, ['/shared/sync', '/shared/sync/a', '/shared/sync/a/b'], 'returns what it created');
    assert.deepEqual(asyncMade, ['/shared/async', '/shared/async/a']);
  });
}
