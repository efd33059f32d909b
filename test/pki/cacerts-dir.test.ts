/**
 * `writeCaCertsDir` (what `certbroker certs [--force]` uses) on a real filesystem: keys end up
 * 0600 whatever was there before, a symlink at a bundle name is replaced and never written
 * through, and without --force anything at a bundle name (a dangling symlink too) is refused.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, lstat, mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadCaCertsDir, PkiError } from '../../src/pki/index.js';
import { writeCaCertsDir } from '../../src/pki/cacerts-dir.js';
import { makePluginCaBundle, type PluginCaBundle } from '../../src/pki/plugin-ca.js';
import { Scratch } from './openssl.js';

const scratch = Scratch.forFile();
let bundle: PluginCaBundle;

before(async () => {
  bundle = await makePluginCaBundle({
    rootSubject: 'O=test, CN=Root',
    caSubject: 'O=test, CN=Intermediate',
    rootTtlSeconds: 30 * 86400,
    caTtlSeconds: 10 * 86400,
    keyType: 'ec-p256',
    nowMs: Date.now(),
  });
});

const mode = async (p: string) => (await lstat(p)).mode & 0o777;

test('--force over keys that were 0644: the new keys are 0600, certificates 0644, no temp files left', async () => {
  const dir = scratch.path('modes');
  await mkdir(dir, { recursive: true });
  for (const f of ['ca-key.pem', 'root-key.pem', 'ca-cert.pem']) {
    await writeFile(join(dir, f), 'old');
    await chmod(join(dir, f), 0o644);
  }
  await writeCaCertsDir(dir, bundle, true);
  assert.equal(await mode(join(dir, 'ca-key.pem')), 0o600);
  assert.equal(await mode(join(dir, 'root-key.pem')), 0o600);
  for (const f of ['ca-cert.pem', 'cert-chain.pem', 'root-cert.pem']) assert.equal(await mode(join(dir, f)), 0o644, f);
  assert.deepEqual((await readdir(dir)).sort(), ['ca-cert.pem', 'ca-key.pem', 'cert-chain.pem', 'root-cert.pem', 'root-key.pem']);
  await loadCaCertsDir(dir);
});

test('--force with a symlink at ca-key.pem: the link is replaced, its target is not written', async () => {
  const dir = scratch.path('links');
  await mkdir(dir, { recursive: true });
  const outside = scratch.path('outside-target.txt');
  await writeFile(outside, 'precious');
  await chmod(outside, 0o644);
  await symlink(outside, join(dir, 'ca-key.pem'));
  await symlink(outside, join(dir, 'root-cert.pem'));
  await writeCaCertsDir(dir, bundle, true);
  assert.equal(await readFile(outside, 'utf8'), 'precious', 'the symlink target is untouched');
  assert.equal(await mode(outside), 0o644);
  const st = await lstat(join(dir, 'ca-key.pem'));
  assert.ok(st.isFile() && !st.isSymbolicLink());
  assert.equal(st.mode & 0o777, 0o600);
  assert.ok((await lstat(join(dir, 'root-cert.pem'))).isFile());
  assert.equal(await readFile(join(dir, 'ca-key.pem'), 'utf8'), bundle.caKeyPem);
});

test('without --force anything at a bundle name is refused, a dangling symlink included', async () => {
  const dir = scratch.path('dangling');
  await mkdir(dir, { recursive: true });
  await symlink(scratch.path('does-not-exist'), join(dir, 'ca-key.pem'));
  await assert.rejects(writeCaCertsDir(dir, bundle), (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_CACERTS_INCONSISTENT');
  assert.deepEqual(await readdir(dir), ['ca-key.pem'], 'nothing written');
});
