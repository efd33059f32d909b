/**
 * Differential proof of the async fast path (`parseCsrAsync`, `FastLeafIssuer.issueAsync`,
 * which import P-256 CSR keys through WebCrypto's raw import): for the same inputs it
 * accepts and refuses exactly what the sync path does, with the same error codes, and builds
 * the same TBSCertificate; openssl accepts its certificates.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import {
  certificateFields,
  createCsr,
  FastLeafIssuer,
  generateKeyPair,
  parseCsr,
  pemEncode,
  PkiError,
  type KeySpec,
} from '../../src/pki/index.js';
import { parseCsrAsync } from '../../src/pki/csr.js';
import { makeRoot } from './fixtures.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';
const scratch = Scratch.forFile();

/** 'ok:<spki hex>:<key kind>:<alg>' or the error code; anything but a PkiError fails the test. */
function outcomeSync(input: string | Uint8Array): string {
  try {
    const c = parseCsr(input);
    return `ok:${c.spki.toString('hex')}:${c.keySpec.kind}:${c.signatureAlgorithm.name}`;
  } catch (err) {
    assert.ok(err instanceof PkiError, `sync: expected PkiError, got ${String(err)}`);
    return err.code;
  }
}

async function outcomeAsync(input: string | Uint8Array): Promise<string> {
  try {
    const c = await parseCsrAsync(input);
    return `ok:${c.spki.toString('hex')}:${c.keySpec.kind}:${c.signatureAlgorithm.name}`;
  } catch (err) {
    assert.ok(err instanceof PkiError, `async: expected PkiError, got ${String(err)}`);
    return err.code;
  }
}

test('parseCsrAsync agrees with parseCsr on good CSRs of every key type and on every corrupted byte', { skip: opensslMissing() }, async () => {
  const specs: Array<KeySpec | undefined> = [undefined, { kind: 'ec', curve: 'P-384' }, { kind: 'rsa', bits: 2048 }];
  const inputs: Array<string | Uint8Array> = [];
  for (const spec of specs) {
    const key = await generateKeyPair(spec);
    const csr = createCsr({ privateKey: key.privateKey, uri: ID });
    inputs.push(csr.pem, csr.der);
  }
  // openssl-made CSRs, including ones we refuse.
  for (const [name, args] of [
    ['p256', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256']],
    ['p521', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-521']],
    ['ed25519', ['-newkey', 'ed25519']],
    ['sha1', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-sha1']],
  ] as Array<[string, string[]]>) {
    const out = scratch.path(`${name}.csr`);
    const r = await openssl(['req', '-new', ...args, '-nodes', '-keyout', scratch.path(`${name}.key`), '-subj', '/CN=x', '-out', out]);
    assert.equal(r.code, 0, `${name}: ${r.stderr}`);
    inputs.push(await readFile(out, 'utf8'));
  }
  const p256 = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: ID }).der;
  // Every byte of a P-256 CSR flipped (the key, the point prefix, the signature, the structure).
  for (let i = 0; i < p256.length; i++) {
    const bad = Buffer.from(p256);
    bad[i] = bad[i]! ^ 0x01;
    inputs.push(bad);
  }
  // A point off the curve, and one with x = p (out of range): structurally fine SPKIs.
  const spkiAt = p256.indexOf(Buffer.from('034200', 'hex')) + 3;
  const offCurve = Buffer.from(p256);
  offCurve[spkiAt + 40] = offCurve[spkiAt + 40]! ^ 0xff;
  const xIsP = Buffer.from(p256);
  Buffer.from('ffffffff00000001000000000000000000000000ffffffffffffffffffffffff', 'hex').copy(xIsP, spkiAt + 1);
  inputs.push(offCurve, xIsP, '', 'garbage', pemEncode('CERTIFICATE', p256), pemEncode('CERTIFICATE REQUEST', Buffer.from('junk')));

  const seen = new Set<string>();
  for (let i = 0; i < inputs.length; i++) {
    const sync = outcomeSync(inputs[i]!);
    const asyncResult = await outcomeAsync(inputs[i]!);
    assert.equal(asyncResult, sync, `input ${i}`);
    seen.add(sync.startsWith('ok:') ? 'ok' : sync);
  }
  assert.equal(outcomeSync(offCurve), 'ERR_PKI_CSR_UNSUPPORTED_KEY');
  assert.equal(outcomeSync(xIsP), 'ERR_PKI_CSR_UNSUPPORTED_KEY');
  // The comparison covered accepted CSRs and each kind of refusal.
  for (const code of ['ok', 'ERR_PKI_CSR_UNSUPPORTED_KEY', 'ERR_PKI_CSR_UNSUPPORTED_ALGORITHM', 'ERR_PKI_CSR_SIGNATURE_INVALID', 'ERR_PKI_CSR_MALFORMED', 'ERR_PKI_PEM_TYPE', 'ERR_PKI_PEM_EMPTY']) {
    assert.ok(seen.has(code), `no input produced ${code}: ${[...seen].join(', ')}`);
  }
});

test('issueAsync builds the TBSCertificate issue builds, keeps its error codes, and openssl verifies the result', { skip: opensslMissing() }, async () => {
  const { root, material } = await makeRoot('O=cluster.local', 86400);
  const signer = material.leafSigner;
  const fixed = (seed: number) => (n: number) => Buffer.alloc(n, seed);
  const files: string[] = [];
  for (let i = 0; i < 6; i++) {
    const options = { signer, now: () => Date.UTC(2026, 10, 29, 12, 0, i), randomBytes: fixed(i + 1), maxTtlSeconds: 7200 };
    const key = await generateKeyPair(i % 3 === 2 ? { kind: 'ec', curve: 'P-384' } : undefined);
    const request = { csr: createCsr({ privateKey: key.privateKey, uri: 'spiffe://ignored/x' }).pem, spiffeId: `${ID}${i}`, ttlSeconds: 3600 };
    const a = new FastLeafIssuer(options).issue(request);
    const b = await new FastLeafIssuer(options).issueAsync(request);
    assert.deepEqual(Buffer.from(certificateFields(b.der).tbs), Buffer.from(certificateFields(a.der).tbs), `case ${i}`);
    assert.deepEqual({ ...b, der: undefined, pem: undefined }, { ...a, der: undefined, pem: undefined });
    const live = await new FastLeafIssuer({ signer }).issueAsync(request);
    files.push(await scratch.write(`async-${i}.pem`, live.pem));
  }
  const r = await openssl(['verify', '-CAfile', await scratch.write('root.pem', root.pem), ...files]);
  assert.equal(r.code, 0, r.stdout + r.stderr);

  const issuer = new FastLeafIssuer({ signer, maxTtlSeconds: 7200 });
  const csr = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: ID }).pem;
  const codeOf = async (p: Promise<unknown>) => p.then(() => 'ok', (e: { code?: string }) => e.code ?? String(e));
  assert.equal(await codeOf(issuer.issueAsync({ csr, spiffeId: ID, ttlSeconds: 7201 })), 'ERR_PKI_TTL_TOO_LONG');
  assert.equal(await codeOf(issuer.issueAsync({ csr, spiffeId: 'spiffe://x/a/../b', ttlSeconds: 60 })), 'ERR_SPIFFE_ID_PATH_DOT_SEGMENT');
  assert.equal(await codeOf(issuer.issueAsync({ csr: 'garbage', spiffeId: ID, ttlSeconds: 60 })), 'ERR_PKI_PEM_EMPTY');
});
