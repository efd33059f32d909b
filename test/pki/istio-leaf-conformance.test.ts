/**
 * Conformance of the fast leaf path with istiod's own encoder: for the same inputs (CSR, signing
 * CA, SPIFFE ID, TTL, clock, serial randomness) `FastLeafIssuer` (LeafTemplate) and Go's
 * crypto/x509 driven with Istio's leaf template (test/pki/go/istio-leaf/main.go) produce a
 * byte-identical TBSCertificate — and, for RSA signers, whose PKCS#1 v1.5 signatures are
 * deterministic, the identical certificate. openssl verifies every certificate from both.
 * leaf-differential.test.ts compares two encoders we wrote; this one compares with Istio's.
 *
 * Needs a Go toolchain (`go` on PATH); without one the test is skipped and says why.
 */
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  caKeyMaterial,
  certificateFields,
  createCsr,
  createRootCa,
  exportPkcs8Pem,
  FastLeafIssuer,
  generateKeyPair,
  loadCaCertsDir,
  makePluginCaBundle,
  parsePemOne,
  writeCaCertsDir,
  type CaKeyMaterial,
  type KeyPair,
  type KeySpec,
} from '../../src/pki/index.js';
import { openssl, Scratch } from './openssl.js';
import { goMissing, opensslMissing } from '../support/tools.js';

const run = promisify(execFile);
const scratch = Scratch.forFile();
const GO_SOURCE = fileURLToPath(new URL('../../../test/pki/go/istio-leaf/main.go', import.meta.url));

/** Why the Go side cannot run here, or undefined when it can. */
/** Builds the Go encoder once into this file's scratch directory (the Go build cache is reused). */
async function buildGoEncoder(): Promise<string> {
  const binary = scratch.path('istio-leaf');
  const env: NodeJS.ProcessEnv = { ...process.env, GO111MODULE: 'off' };
  if (!env.GOCACHE && !env.HOME && !env.XDG_CACHE_HOME) env.GOCACHE = scratch.path('go-cache');
  await run('go', ['build', '-o', binary, GO_SOURCE], { env });
  return binary;
}

/** One leaf as the Go encoder takes it (see main.go). */
interface GoCase {
  readonly signerCertPem?: string;
  readonly signerKeyPem?: string;
  readonly cacertsDir?: string;
  readonly csrPem: string;
  readonly nowUnixMilli: number;
  readonly ttlSeconds: number;
  readonly serialHex: string;
  readonly spiffeId: string;
}

async function goIssue(binary: string, cases: readonly GoCase[]): Promise<Array<{ certPem?: string; error?: string }>> {
  const answer = new Promise<string>((resolve, reject) => {
    const child = execFile(binary, [], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(stdout);
    });
    child.stdin!.end(JSON.stringify({ cases }));
  });
  return JSON.parse(await answer) as Array<{ certPem?: string; error?: string }>;
}

interface SigningCa {
  readonly name: string;
  readonly material: CaKeyMaterial;
  /** How the Go side gets the same signer: PEM texts, or the cacerts directory istiod reads. */
  readonly goSigner: Pick<GoCase, 'signerCertPem' | 'signerKeyPem' | 'cacertsDir'>;
  readonly rootPem: string;
  readonly untrustedPem: string;
}

const CA_NOW_MS = Date.UTC(2026, 0, 1);
const CA_TTL_SECONDS = 30 * 365 * 86400; // to 2055: every leaf below fits, so nothing is clamped

async function rootSigner(name: string, keySpec: KeySpec): Promise<SigningCa> {
  const root = await createRootCa({ subject: `O=cluster.local, CN=${name}`, ttlSeconds: CA_TTL_SECONDS, keySpec, nowMs: CA_NOW_MS });
  return {
    name,
    material: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }),
    goSigner: { signerCertPem: root.pem, signerKeyPem: exportPkcs8Pem(root.privateKey).reveal() },
    rootPem: root.pem,
    untrustedPem: '',
  };
}

/** An Istio plug-in CA (`cacerts`): both sides load the intermediate from the same directory. */
async function cacertsSigner(): Promise<SigningCa> {
  const bundle = await makePluginCaBundle({
    rootSubject: 'O=example, CN=Root CA',
    caSubject: 'O=example, OU=mesh, CN=Intermediate CA',
    rootTtlSeconds: CA_TTL_SECONDS,
    caTtlSeconds: CA_TTL_SECONDS - 86400,
    keyType: 'ec-p256',
    nowMs: CA_NOW_MS,
  });
  const dir = scratch.path('cacerts');
  await writeCaCertsDir(dir, bundle);
  return {
    name: 'cacerts-intermediate',
    material: await loadCaCertsDir(dir, CA_NOW_MS),
    goSigner: { cacertsDir: dir },
    rootPem: bundle.rootCertPem,
    untrustedPem: bundle.caCertPem,
  };
}

interface Issuance {
  readonly name: string;
  readonly nowMs: number;
  readonly ttlSeconds: number;
  /** The 16 random bytes both sides turn into the serial. */
  readonly serialRandomHex: string;
  readonly spiffeId: string;
  readonly leafKey: KeyPair;
}

async function issuances(): Promise<Issuance[]> {
  const p256 = await generateKeyPair();
  const rsa = await generateKeyPair({ kind: 'rsa', bits: 2048 });
  // 2 KiB of path in 8-byte segments: the SAN needs 2-byte DER lengths at every level.
  const longId = `spiffe://cluster.local/ns/${'segment/'.repeat(250)}end`;
  assert.ok(longId.length > 2000 && longId.length <= 2048, String(longId.length));
  return [
    {
      name: 'default 24 h',
      nowMs: Date.UTC(2026, 2, 1, 12, 0, 0),
      ttlSeconds: 86400,
      serialRandomHex: '3a9f0c22d17e4b5a86c1f0e2d3b4a596',
      spiffeId: 'spiffe://cluster.local/ns/default/sa/sleep',
      leafKey: p256,
    },
    {
      name: '1 h, clock mid-second, serial with the high bit set',
      nowMs: Date.UTC(2027, 6, 15, 8, 30, 45) + 999,
      ttlSeconds: 3600,
      serialRandomHex: 'ff00ee11dd22cc33bb44aa5599668877',
      spiffeId: 'spiffe://td/ns/a/sa/b',
      leafKey: p256,
    },
    {
      name: '90 d (the maximum), serial with leading zero bytes',
      nowMs: Date.UTC(2030, 10, 30, 23, 59, 59) + 1,
      ttlSeconds: 90 * 86400,
      serialRandomHex: '0000000000000000000000000000007f',
      spiffeId: 'spiffe://example.org/ns/istio-system/sa/ztunnel',
      leafKey: p256,
    },
    {
      name: '1 s, RSA workload key',
      nowMs: Date.UTC(2031, 4, 5, 6, 7, 8) + 500,
      ttlSeconds: 1,
      serialRandomHex: '0123456789abcdef0123456789abcdef',
      spiffeId: 'spiffe://cluster.local/ns/payments/sa/api-server.v2',
      leafKey: rsa,
    },
    {
      name: 'long SPIFFE ID (2 KiB)',
      nowMs: Date.UTC(2028, 1, 29, 0, 0, 0),
      ttlSeconds: 43200,
      serialRandomHex: '80000000000000000000000000000001',
      spiffeId: longId,
      leafKey: p256,
    },
    {
      name: '2 d across 2050 (UTCTime notBefore, GeneralizedTime notAfter)',
      nowMs: Date.UTC(2049, 11, 31, 12, 0, 0),
      ttlSeconds: 2 * 86400,
      serialRandomHex: '00ffffffffffffffffffffffffffffff',
      spiffeId: 'spiffe://cluster.local/ns/default/sa/default',
      leafKey: p256,
    },
  ];
}

test('FastLeafIssuer TBSCertificate == Go crypto/x509 with Istio leaf template; openssl verifies both', { skip: goMissing() ?? opensslMissing() }, async () => {
  const [binary, cas, plans] = await Promise.all([
    buildGoEncoder(),
    Promise.all([
      rootSigner('p256-root', { kind: 'ec', curve: 'P-256' }),
      cacertsSigner(),
      rootSigner('rsa2048-root', { kind: 'rsa', bits: 2048 }),
      rootSigner('p384-root', { kind: 'ec', curve: 'P-384' }),
    ]),
    issuances(),
  ]);

  const ours: Array<{ ca: SigningCa; issuance: Issuance; der: Uint8Array; pem: string }> = [];
  const goCases: GoCase[] = [];
  for (const ca of cas) {
    for (const issuance of plans) {
      const csr = createCsr({ privateKey: issuance.leafKey.privateKey, uri: 'spiffe://ignored/by/both/sides' });
      const issuer = new FastLeafIssuer({
        signer: ca.material.leafSigner,
        now: () => issuance.nowMs,
        randomBytes: (n) => {
          assert.equal(n, 16);
          return Buffer.from(issuance.serialRandomHex, 'hex');
        },
      });
      const leaf = issuer.issue({ csr: csr.pem, spiffeId: issuance.spiffeId, ttlSeconds: issuance.ttlSeconds });
      ours.push({ ca, issuance, der: leaf.der, pem: leaf.pem });
      goCases.push({
        ...ca.goSigner,
        csrPem: csr.pem,
        nowUnixMilli: issuance.nowMs,
        ttlSeconds: issuance.ttlSeconds,
        serialHex: issuance.serialRandomHex,
        spiffeId: issuance.spiffeId,
      });
    }
  }

  const theirs = await goIssue(binary, goCases);
  assert.equal(theirs.length, ours.length);
  const files = new Map<string, string[]>();
  for (let i = 0; i < ours.length; i++) {
    const { ca, issuance, der, pem } = ours[i]!;
    const label = `${ca.name} / ${issuance.name}`;
    const go = theirs[i]!;
    assert.equal(go.error, undefined, `${label}: Go encoder failed: ${go.error ?? ''}`);
    const goDer = parsePemOne(go.certPem!, ['CERTIFICATE']).der;
    const ourTbs = certificateFields(der).tbs;
    const goTbs = certificateFields(goDer).tbs;
    assert.equal(ourTbs.toString('hex'), goTbs.toString('hex'), `${label}: TBSCertificate differs from Go/Istio`);
    if (ca.material.keySpec.kind === 'rsa') {
      assert.equal(Buffer.from(der).toString('hex'), goDer.toString('hex'), `${label}: RSA-signed certificate differs from Go/Istio`);
    }
    const list = files.get(ca.name) ?? [];
    list.push(await scratch.write(`${ca.name}-${i}-fast.pem`, pem));
    list.push(await scratch.write(`${ca.name}-${i}-go.pem`, go.certPem!));
    files.set(ca.name, list);
  }
  assert.equal(ours.length, cas.length * plans.length);

  for (const ca of cas) {
    const leaves = files.get(ca.name)!;
    const args = ['verify', '-no_check_time', '-x509_strict', '-CAfile', await scratch.write(`${ca.name}-root.pem`, ca.rootPem)];
    if (ca.untrustedPem !== '') args.push('-untrusted', await scratch.write(`${ca.name}-inter.pem`, ca.untrustedPem));
    const r = await openssl([...args, ...leaves]);
    assert.equal(r.code, 0, `${ca.name}: ${r.stdout}${r.stderr}`);
    assert.equal(r.stdout.split('\n').filter((l) => l.endsWith(': OK')).length, leaves.length, r.stdout);
  }
});
