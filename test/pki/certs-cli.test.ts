import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadCaCertsDir, keySpecOf } from '../../src/pki/index.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const run = promisify(execFile);
const CERTS = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'certs.js');
// The subcommand module run on its own (as main.ts mounts it), so this test does not depend on
// every other subcommand module being present.
const SCRIPT = `
  const { command } = await import(${JSON.stringify(CERTS)});
  const cmd = command();
  cmd.exitOverride();
  try {
    await cmd.parseAsync(process.argv.slice(1), { from: 'user' });
  } catch (err) {
    process.stderr.write('certbroker: ' + (err instanceof Error ? err.message : String(err)) + '\\n');
    process.exitCode = 1;
  }
`;
const scratch = Scratch.forFile();

async function certs(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, ['--input-type=module', '-e', SCRIPT, '--', ...args]);
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test('certbroker certs writes a plug-in CA bundle that loads and that openssl verifies', { skip: opensslMissing() }, async () => {
  const out = scratch.path('generated');
  const r = await certs(['--out', out, '--root-subject', 'O=example, CN=Test Root', '--ca-days', '30']);
  assert.equal(r.code, 0, r.stderr);
  for (const f of ['root-cert.pem', 'ca-cert.pem', 'cert-chain.pem']) assert.equal(((await stat(join(out, f))).mode & 0o777), 0o644, f);
  for (const f of ['ca-key.pem', 'root-key.pem']) assert.equal(((await stat(join(out, f))).mode & 0o777), 0o600, f);
  const m = await loadCaCertsDir(out);
  assert.equal(m.roots[0]!.subject, 'O=example, CN=Test Root');
  assert.equal(m.cert.subject, 'O=certbroker, CN=Intermediate CA');
  const days = (m.cert.notAfter.getTime() - Date.now()) / 86400_000;
  assert.ok(days > 29 && days <= 30, String(days));
  const v = await openssl(['verify', '-CAfile', join(out, 'root-cert.pem'), join(out, 'ca-cert.pem')]);
  assert.equal(v.code, 0, v.stdout + v.stderr);
  const k = await openssl(['pkey', '-in', join(out, 'ca-key.pem'), '-check', '-noout']);
  assert.equal(k.code, 0, k.stderr);

  const again = await certs(['--out', out]);
  assert.notEqual(again.code, 0);
  assert.match(again.stderr, /already exists/);
  const forced = await certs(['--out', out, '--force', '--key-type', 'ec-p384']);
  assert.equal(forced.code, 0, forced.stderr);
  assert.deepEqual(keySpecOf((await loadCaCertsDir(out)).keyObject), { kind: 'ec', curve: 'P-384' });
});

test('certbroker certs lists every bad option at once', async () => {
  const r = await certs(['--out', scratch.path('bad'), '--key-type', 'dsa', '--root-days', 'ten', '--ca-days', '0']);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /--key-type="dsa"/);
  assert.match(r.stderr, /--root-days="ten"/);
  assert.match(r.stderr, /--ca-days="0"/);
  const subj = await certs(['--out', scratch.path('bad2'), '--root-subject', 'nonsense']);
  assert.notEqual(subj.code, 0);
  assert.match(subj.stderr, /not a distinguished name/);
});
