/**
 * The self-signed signer against a real devcluster Secret holding a bad root: a certificate
 * that is not a CA (made by openssl), a CA whose keyUsage lacks keyCertSign, an expired root, a
 * root whose key is another's, and one that is not self-signed. Each is refused (never installed,
 * never overwritten), the signer is not ready with a reason naming the Secret and the problem, and
 * deleting the Secret lets the retry create a fresh root.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { X509Certificate } from 'node:crypto';
import { FakeClock } from '../support/fake-clock.js';
import { createLogger } from '../../src/core/log.js';
import { CA_CERT_KEY, CA_KEY_KEY, CA_SECRET_TYPE, kubeCaSecretStore, SelfSignedSigner } from '../../src/ca/index.js';
import { createIntermediateCa, createRootCa, exportPkcs8Pem, exportSpkiDer, generateKeyPair, toSigningCryptoKey, x509 } from '../../src/pki/index.js';
import { adminClient, createNamespace, startCluster, type Clients, type DevCluster } from '../support/cluster.js';
import { newCsr, opensslVerifyChain, tempDir } from './support/pki-fixtures.js';
import { opensslMissing } from '../support/tools.js';

const SECRET = 'istio-ca-secret';
const ID = 'spiffe://cluster.local/ns/default/sa/sleep';
const run = promisify(execFile);

let cluster: DevCluster;
let api: Clients;

before(async () => {
  cluster = await startCluster({ simulateKubelet: false });
  api = adminClient(cluster);
});

after(async () => {
  await cluster?.close();
});

interface Bad {
  readonly certPem: string;
  readonly keyPem: string;
}

async function putSecret(namespace: string, bad: Bad): Promise<void> {
  await createNamespace(cluster, namespace);
  await api.core.createNamespacedSecret({
    namespace,
    body: {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: SECRET, namespace },
      type: CA_SECRET_TYPE,
      data: { [CA_CERT_KEY]: Buffer.from(bad.certPem).toString('base64'), [CA_KEY_KEY]: Buffer.from(bad.keyPem).toString('base64') },
    },
  });
}

async function readSecret(namespace: string): Promise<{ data: Record<string, string>; resourceVersion: string | undefined }> {
  const s = await api.core.readNamespacedSecret({ namespace, name: SECRET });
  return { data: s.data ?? {}, resourceVersion: s.metadata?.resourceVersion };
}

function signerIn(namespace: string, clock: FakeClock, logs: string[]): SelfSignedSigner {
  return new SelfSignedSigner({
    store: kubeCaSecretStore({ kubeConfig: api.kc, namespace, name: SECRET }),
    trustDomain: 'cluster.local',
    keyType: 'ec',
    rootTtlSeconds: 365 * 86_400,
    clock,
    logger: createLogger({ level: 'debug', sink: (l) => logs.push(l) }),
    maxTtlSeconds: 86_400,
  });
}

/** A self-signed certificate with CA:FALSE and its key, made by openssl (not by our pki). */
async function opensslNonCa(): Promise<Bad> {
  const dir = await tempDir('ss-nonca-');
  try {
    const key = join(dir.path, 'k.pem');
    const cert = join(dir.path, 'c.pem');
    await run('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '30',
      '-subj', '/O=cluster.local', '-addext', 'basicConstraints=critical,CA:FALSE', '-keyout', key, '-out', cert,
    ]);
    return { certPem: await readFile(cert, 'utf8'), keyPem: await readFile(key, 'utf8') };
  } finally {
    await dir.remove();
  }
}

/** A self-signed cA:true root whose keyUsage is digitalSignature only. */
async function caWithoutCertSign(): Promise<Bad> {
  const keys = await generateKeyPair();
  const name = new x509.Name('O=cluster.local');
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: '0a1b2c',
    subject: name,
    issuer: name,
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + 86_400_000),
    publicKey: exportSpkiDer(keys.privateKey),
    signingKey: await toSigningCryptoKey(keys.privateKey),
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true)],
  });
  return { certPem: cert.toString('pem'), keyPem: exportPkcs8Pem(keys.privateKey).reveal() };
}

const cases: { readonly name: string; readonly namespace: string; readonly make: () => Promise<Bad>; readonly code: string; readonly problem: RegExp }[] = [
  { name: 'a certificate that is not a CA (openssl, CA:FALSE)', namespace: 'bad-nonca', make: opensslNonCa, code: 'ERR_PKI_SIGNER_NOT_CA', problem: /not a CA certificate/ },
  { name: 'a CA without keyCertSign', namespace: 'bad-ku', make: caWithoutCertSign, code: 'ERR_PKI_SIGNER_NOT_CA', problem: /keyCertSign/ },
  {
    name: 'an expired root',
    namespace: 'bad-expired',
    make: async () => {
      const old = await createRootCa({ subject: 'O=cluster.local', ttlSeconds: 86_400, nowMs: Date.now() - 3 * 86_400_000 });
      return { certPem: old.pem, keyPem: exportPkcs8Pem(old.privateKey).reveal() };
    },
    code: 'ERR_PKI_SIGNER_EXPIRED',
    problem: /expired \(notAfter /,
  },
  {
    name: 'a root with another root’s key',
    namespace: 'bad-mismatch',
    make: async () => {
      const a = await createRootCa({ subject: 'O=cluster.local', ttlSeconds: 86_400 });
      const b = await createRootCa({ subject: 'O=cluster.local', ttlSeconds: 86_400 });
      return { certPem: a.pem, keyPem: exportPkcs8Pem(b.privateKey).reveal() };
    },
    code: 'ERR_PKI_CACERTS_KEY_MISMATCH',
    problem: /does not match/,
  },
  {
    name: 'an intermediate (not self-signed) with its own key',
    namespace: 'bad-notroot',
    make: async () => {
      const root = await createRootCa({ subject: 'O=cluster.local, CN=Root', ttlSeconds: 86_400 });
      const inter = await createIntermediateCa({ subject: 'O=cluster.local, CN=Intermediate', ttlSeconds: 86_400, issuer: { cert: root.cert, privateKey: root.privateKey } });
      return { certPem: inter.pem, keyPem: exportPkcs8Pem(inter.privateKey).reveal() };
    },
    code: 'ERR_PKI_CERT_INVALID',
    problem: /not a self-signed root/,
  },
];

for (const c of cases) {
  test(`self-signed: a Secret holding ${c.name} is refused, left unchanged, and the signer says why`, { skip: opensslMissing() }, async (t) => {
    await putSecret(c.namespace, await c.make());
    const stored = await readSecret(c.namespace);
    const logs: string[] = [];
    const clock = new FakeClock(Date.now());
    const signer = signerIn(c.namespace, clock, logs);
    t.after(() => signer.close());

    await assert.rejects(signer.load(), (err: { code?: string; cause?: { code?: string } }) => {
      assert.equal(err.code, 'ERR_CA_SIGNER_MATERIAL_INVALID');
      assert.equal(err.cause?.code, c.code);
      return true;
    });
    assert.equal(signer.material, undefined, 'nothing installed');

    const started = signer.start();
    await clock.waitForTimers(1); // the first attempt failed; the retry is armed
    assert.equal(signer.ready, false);
    const reason = signer.notReadyReason ?? '';
    assert.match(reason, new RegExp(`secret ${c.namespace}/${SECRET}`), reason);
    assert.match(reason, c.problem, reason);
    assert.match(reason, new RegExp(c.code), reason);
    await assert.rejects(signer.sign({ csrPem: await newCsr(), spiffeId: ID, ttlSeconds: 600 }), { code: 'ERR_CA_SIGNER_NOT_READY' });
    assert.ok(logs.some((l) => l.includes('stored self-signed root refused') && l.includes(`${c.namespace}/${SECRET}`)));
    assert.deepEqual(await readSecret(c.namespace), stored, 'the bad Secret is not overwritten');

    // Recovery: the operator deletes the Secret; the next retry creates a new root in its place.
    await api.core.deleteNamespacedSecret({ namespace: c.namespace, name: SECRET });
    await clock.advance(500);
    await started;
    assert.equal(signer.ready, true, signer.notReadyReason);
    assert.equal(signer.origin, 'created');
    const fresh = await readSecret(c.namespace);
    const root = new X509Certificate(Buffer.from(fresh.data[CA_CERT_KEY] ?? '', 'base64'));
    assert.equal(root.ca, true);
    assert.notEqual(Buffer.from(fresh.data[CA_CERT_KEY] ?? '', 'base64').toString(), Buffer.from(stored.data[CA_CERT_KEY] ?? '', 'base64').toString());
    const signed = await signer.sign({ csrPem: await newCsr(), spiffeId: ID, ttlSeconds: 600 });
    assert.match(await opensslVerifyChain(signed.certChain), /leaf\.pem: OK/);
  });
}
