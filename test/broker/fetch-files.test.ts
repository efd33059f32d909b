/**
 * `certbroker fetch --out-dir`: the PEM files on disk. The key is 0600 whatever the umask and
 * whatever already sits in the directory (a leftover or planted temp file, a symlink); the
 * certificates are 0644; nothing is written through a symlink; no temp file is left behind;
 * openssl reads the key back and it matches the certificate.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmod, lstat, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeSvidFiles } from '../../src/broker/index.js';
import type { SubscribeToX509SVIDResponse } from '../../src/protocol/spiffe-broker.js';
import { createRootCa } from '../../src/pki/ca-certs.js';
import { exportPkcs8Der } from '../../src/pki/keys.js';
import { opensslMissing } from '../support/tools.js';
import { tempDirSync } from '../support/scratch.js';

const mode = async (path: string) => (await stat(path)).mode & 0o777;

describe('certbroker fetch: PEM files', () => {
  let base: string;
  let msg: Pick<SubscribeToX509SVIDResponse, 'svids'>;
  let keyDer: Buffer;
  let certPem: string;
  const umask = process.umask();

  before(async () => {
    base = tempDirSync('fetch-files-');
    const ca = await createRootCa({ subject: 'O=fetch-test', ttlSeconds: 3600 });
    keyDer = exportPkcs8Der(ca.privateKey).reveal();
    certPem = ca.pem;
    msg = { svids: [{ spiffe_id: 'spiffe://td/ns/a/sa/b', x509_svid: Buffer.from(ca.der), x509_svid_key: keyDer, bundle: Buffer.from(ca.der), hint: '' }] };
  });

  after(async () => {
    process.umask(umask);
    await rm(base, { recursive: true, force: true });
  });

  it('key 0600 and certificates 0644 under any umask; openssl reads the key and it matches the certificate', { skip: opensslMissing() }, async () => {
    for (const mask of [0o000, 0o077]) {
      process.umask(mask);
      const dir = join(base, `umask-${mask.toString(8)}`);
      await writeSvidFiles(dir, msg);
      process.umask(umask);
      assert.equal(await mode(join(dir, 'key.pem')), 0o600, `key.pem under umask ${mask.toString(8)}`);
      assert.equal(await mode(join(dir, 'cert-chain.pem')), 0o644);
      assert.equal(await mode(join(dir, 'root-cert.pem')), 0o644);
      assert.deepEqual((await readdir(dir)).sort(), ['cert-chain.pem', 'key.pem', 'root-cert.pem'], 'no temp files left');
      const keyPub = execFileSync('openssl', ['pkey', '-in', join(dir, 'key.pem'), '-pubout'], { encoding: 'utf8' });
      const certPub = execFileSync('openssl', ['x509', '-in', join(dir, 'cert-chain.pem'), '-noout', '-pubkey'], { encoding: 'utf8' });
      assert.equal(keyPub, certPub);
      assert.equal(await readFile(join(dir, 'root-cert.pem'), 'utf8'), certPem);
    }
  });

  it('a world-readable file already at the old temp path does not lend the key its mode', async () => {
    const dir = join(base, 'planted-file');
    await writeSvidFiles(dir, msg); // creates the directory
    const planted = join(dir, 'key.pem.tmp');
    await writeFile(planted, '');
    await chmod(planted, 0o666);
    await writeSvidFiles(dir, msg);
    assert.equal(await mode(join(dir, 'key.pem')), 0o600);
    assert.equal(await readFile(planted, 'utf8'), '', 'the planted file is left alone');
  });

  it('a symlink at the old temp path is never written through', async () => {
    const dir = join(base, 'planted-link');
    await writeSvidFiles(dir, msg);
    const victim = join(base, 'victim.txt');
    await writeFile(victim, 'untouched');
    await chmod(victim, 0o644);
    for (const name of ['key.pem.tmp', 'cert-chain.pem.tmp', 'root-cert.pem.tmp']) await symlink(victim, join(dir, name));
    await writeSvidFiles(dir, msg);
    assert.equal(await readFile(victim, 'utf8'), 'untouched', 'nothing written through the symlink');
    assert.ok((await lstat(join(dir, 'key.pem'))).isFile());
    assert.equal(await mode(join(dir, 'key.pem')), 0o600);
    assert.ok((await readFile(join(dir, 'key.pem'), 'utf8')).startsWith('-----BEGIN PRIVATE KEY-----'));
  });

  it('concurrent writes of two messages leave a matching chain and key, never a mix', async () => {
    const other = await createRootCa({ subject: 'O=fetch-test-2', ttlSeconds: 3600 });
    const msg2 = { svids: [{ ...msg.svids[0]!, x509_svid: Buffer.from(other.der), x509_svid_key: exportPkcs8Der(other.privateKey).reveal(), bundle: Buffer.from(other.der) }] };
    const dir = join(base, 'concurrent');
    await writeSvidFiles(dir, msg);
    // Two writers at once (what a fast rotation looked like before writes were serialized):
    // each file is replaced atomically, so every file is one of the two complete versions.
    await Promise.all([writeSvidFiles(dir, msg), writeSvidFiles(dir, msg2)]);
    const names = await readdir(dir);
    assert.deepEqual(names.sort(), ['cert-chain.pem', 'key.pem', 'root-cert.pem'], 'no temp files left');
    const chain = await readFile(join(dir, 'cert-chain.pem'), 'utf8');
    assert.ok(chain === certPem || chain === other.pem, 'chain is one complete version');
  });
});
