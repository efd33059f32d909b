/**
 * The CA's serving certificate follows its signer: after a cacerts rotation, new TLS
 * connections are served with a certificate from the new CA (no restart), and issued chains end
 * with both roots while the rotation lasts. One the signer could not renew is withdrawn at its
 * notAfter (handshakes refused) and comes back when the signer can issue again.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { SERVING_CERT_TTL_SECONDS, type CaServer } from '../../src/ca/index.js';
import { silentLogger } from '../../src/core/log.js';
import { SkipClock } from '../support/skip-clock.js';
import { InstalledSigner, rootMaterial } from './support/installed-signer.js';
import { caClient, startCaEnv, type CaEnv } from './support/ca-env.js';
import { cacertsFiles, makePluginCa, newCsr, opensslVerifyChain, tempDir, writeCacertsAtomic, type PluginCa } from './support/pki-fixtures.js';
import { opensslMissing } from '../support/tools.js';

let env: CaEnv;
let dir: { path: string; remove: () => Promise<void> };
let first: PluginCa;
let ca: CaServer;

before(async () => {
  env = await startCaEnv();
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  dir = await tempDir('ca-rot-');
  await mkdir(join(dir.path, 'cacerts'));
  first = await makePluginCa('First');
  await writeCacertsAtomic(join(dir.path, 'cacerts'), cacertsFiles(first));
  ca = await env.startCa({ signer: { kind: 'cacerts', dir: join(dir.path, 'cacerts'), pollIntervalMs: 50 } });
});

after(async () => {
  await env?.close();
  await dir?.remove();
});

/** The leaf certificate a fresh TLS connection to the CA presents, verified against `rootsPem`. */
function servingIssuer(rootsPem: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: ca.port, ca: rootsPem, servername: 'localhost', ALPNProtocols: ['h2'] }, () => {
      const cert = s.getPeerX509Certificate();
      s.destroy();
      if (!cert) reject(new Error('no peer certificate'));
      else resolve(cert.issuer);
    });
    s.on('error', reject);
  });
}

test('rotation: new connections get a serving certificate from the new CA; chains carry both roots', { skip: opensslMissing() }, async () => {
  assert.match(await servingIssuer(first.root.pem), /CN=First Intermediate/);
  const second = await makePluginCa('Second');
  await writeCacertsAtomic(join(dir.path, 'cacerts'), cacertsFiles(second, [first.root]));
  while (!ca.rootsPem().includes(second.root.pem.trim())) await new Promise((r) => setTimeout(r, 10));
  let issuer = '';
  for (let i = 0; i < 200 && !/Second/.test(issuer); i++) {
    issuer = await servingIssuer(second.root.pem).catch(() => '');
    if (!/Second/.test(issuer)) await new Promise((r) => setTimeout(r, 10));
  }
  assert.match(issuer, /CN=Second Intermediate/, 'served by the new CA, trusted with the new root alone');

  const c = caClient(ca.port, second.root.pem);
  try {
    const token = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
    const r = await c.create({ token, csr: await newCsr() });
    assert.equal(r.code, undefined, JSON.stringify(r));
    assert.equal(r.chain![1], second.intermediate.pem);
    assert.equal(r.chain![2], second.root.pem + first.root.pem);
    assert.ok(new X509Certificate(r.chain![0]!).checkIssued(new X509Certificate(second.intermediate.pem)));
    assert.match(await opensslVerifyChain(r.chain!), /OK/);
  } finally {
    c.close();
  }
});

test('TLS CA started before its cacerts exist refuses handshakes, then serves once they appear', async () => {
  await mkdir(join(dir.path, 'late'));
  const late = await env.startCa({ signer: { kind: 'cacerts', dir: join(dir.path, 'late'), pollIntervalMs: 50 } });
  const plugin = await makePluginCa('Late');
  const handshake = () =>
    new Promise<string>((resolve) => {
      const s = connect({ host: '127.0.0.1', port: late.port, ca: plugin.root.pem, servername: 'localhost', ALPNProtocols: ['h2'] }, () => {
        const issuer = s.getPeerX509Certificate()?.issuer ?? '';
        s.destroy();
        resolve(issuer);
      });
      s.on('error', () => resolve('refused'));
    });
  assert.equal(late.ready, false);
  assert.equal(await handshake(), 'refused');
  await writeCacertsAtomic(join(dir.path, 'late'), cacertsFiles(plugin));
  let issuer = 'refused';
  for (let i = 0; i < 300 && issuer === 'refused'; i++) {
    issuer = await handshake();
    if (issuer === 'refused') await new Promise((r) => setTimeout(r, 10));
  }
  assert.match(issuer, /CN=Late Intermediate/);
  assert.equal(late.ready, true);
  await late.stop();
});

test('a serving certificate the signer could not renew is withdrawn at notAfter (handshakes refused), and served again once it can', async () => {
  const clock = new SkipClock();
  const signer = new InstalledSigner({ clock, logger: silentLogger, maxTtlSeconds: 86400 });
  signer.use(await rootMaterial('O=Withdrawn'));
  const own = await env.startCa({ clock, signer: { kind: 'custom', signer } });
  // The CA's clock is skipped ahead of real time, so the issuer is read without verifying validity.
  const issuer = () =>
    new Promise<string>((resolve) => {
      const s = connect({ host: '127.0.0.1', port: own.port, rejectUnauthorized: false, servername: 'localhost', ALPNProtocols: ['h2'] }, () => {
        const cert = s.getPeerX509Certificate();
        s.destroy();
        resolve(cert?.issuer ?? 'none');
      });
      s.on('error', () => resolve('refused'));
    });
  try {
    assert.equal(await issuer(), 'O=Withdrawn');
    await signer.close(); // from now on the signer cannot issue: the renewal at half-life fails
    clock.skip(SERVING_CERT_TTL_SECONDS * 1000);
    assert.equal(await issuer(), 'refused', 'no certificate is presented past its notAfter');
    assert.equal(own.ready, false);
    signer.use(await rootMaterial('O=Back'));
    let now = 'refused';
    for (let i = 0; i < 300 && now === 'refused'; i++) {
      now = await issuer();
      if (now === 'refused') await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(now, 'O=Back');
  } finally {
    await own.stop();
  }
});
