import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import {
  createCsr,
  generateKeyPair,
  parseCsr,
  readCsrDetails,
  verifyCsrReference,
  PkiError,
  pemEncode,
} from '../../src/pki/index.js';
import { csrDer } from '../../src/pki/csr.js';
import { codeOf } from './fixtures.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';
const scratch = Scratch.forFile();

test('our CSR passes openssl req -verify and has the ztunnel shape', { skip: opensslMissing() }, async () => {
  for (const spec of [undefined, { kind: 'ec', curve: 'P-384' } as const, { kind: 'rsa', bits: 2048 } as const]) {
    const key = await generateKeyPair(spec);
    const csr = createCsr({ privateKey: key.privateKey, uri: ID });
    const file = await scratch.write('ours.csr', csr.pem);
    const r = await openssl(['req', '-in', file, '-verify', '-noout', '-text']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout + r.stderr, /verify OK/i);
    assert.match(r.stdout, /Subject:\s*\n/);
    assert.match(r.stdout, /X509v3 Subject Alternative Name: critical\s*\n\s*URI:spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep/);
    const parsed = parseCsr(csr.pem);
    assert.deepEqual(parsed.keySpec, spec ?? { kind: 'ec', curve: 'P-256' });
    assert.deepEqual(readCsrDetails(csr.der), { subject: '', uris: [ID], sanCritical: true, dnsNames: [], ipAddresses: [], emails: [], otherSans: 0 });
    assert.equal(await verifyCsrReference(csr.pem), true);
  }
});

test('a CSR with serving names (the CA asking a Kubernetes signer for its TLS certificate) passes openssl and reads back', { skip: opensslMissing() }, async (t) => {
  const scratch = Scratch.forTest(t);
  const { privateKey } = await generateKeyPair();
  const csr = createCsr({ privateKey, servingNames: ['localhost', '127.0.0.1', '::1'] });
  const r = await openssl(['req', '-in', await scratch.write('named.csr', csr.pem), '-verify', '-noout', '-text']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /X509v3 Subject Alternative Name: critical\s*\n\s*DNS:localhost, IP Address:127\.0\.0\.1, IP Address:0:0:0:0:0:0:0:1/);
  assert.deepEqual(readCsrDetails(csr.der), { subject: '', uris: [], sanCritical: true, dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '::1'], emails: [], otherSans: 0 });
  const both = createCsr({ privateKey, uri: ID, servingNames: ['sleep.default.svc'] });
  assert.deepEqual({ ...readCsrDetails(both.der), subject: undefined }, { subject: undefined, uris: [ID], sanCritical: true, dnsNames: ['sleep.default.svc'], ipAddresses: [], emails: [], otherSans: 0 });
});

test('CSRs made by openssl parse and verify (P-256, P-384, RSA 2048/3072/4096)', { skip: opensslMissing() }, async () => {
  const specs: Array<[string, string[]]> = [
    ['p256', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256']],
    ['p384', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-384']],
    ['rsa2048', ['-newkey', 'rsa:2048']],
    ['rsa3072', ['-newkey', 'rsa:3072']],
    ['rsa4096', ['-newkey', 'rsa:4096']],
  ];
  for (const [name, args] of specs) {
    const out = scratch.path(`${name}.csr`);
    const r = await openssl(['req', '-new', ...args, '-nodes', '-keyout', scratch.path(`${name}.key`), '-subj', '/', '-addext', `subjectAltName=critical,URI:${ID}`, '-out', out]);
    assert.equal(r.code, 0, r.stderr);
    const pem = await readFile(out, 'utf8');
    const parsed = parseCsr(pem);
    assert.equal(parsed.keySpec.kind, name.startsWith('rsa') ? 'rsa' : 'ec', name);
    assert.deepEqual(readCsrDetails(pem).uris, [ID]);
  }
});

test('CSRs with unsupported keys or algorithms are coded errors', { skip: opensslMissing() }, async () => {
  const cases: Array<[string, string[], string]> = [
    ['ed25519', ['-newkey', 'ed25519'], 'ERR_PKI_CSR_UNSUPPORTED_ALGORITHM'],
    ['p521', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-521'], 'ERR_PKI_CSR_UNSUPPORTED_KEY'],
    ['rsa1024', ['-newkey', 'rsa:1024'], 'ERR_PKI_CSR_UNSUPPORTED_KEY'],
    ['sha1', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-sha1'], 'ERR_PKI_CSR_UNSUPPORTED_ALGORITHM'],
  ];
  for (const [name, args, code] of cases) {
    const out = scratch.path(`${name}.csr`);
    const r = await openssl(['req', '-new', ...args, '-nodes', '-keyout', scratch.path(`${name}.key`), '-subj', '/CN=x', '-out', out]);
    assert.equal(r.code, 0, `${name}: ${r.stderr}`);
    const pem = await readFile(out, 'utf8');
    assert.equal(codeOf(() => parseCsr(pem)), code, name);
  }
});


test('garbage, wrong PEM types and tampered CSRs are coded errors', { skip: opensslMissing() }, async () => {
  const key = await generateKeyPair();
  const good = createCsr({ privateKey: key.privateKey, uri: ID });
  assert.equal(codeOf(() => parseCsr('')), 'ERR_PKI_PEM_EMPTY');
  assert.equal(codeOf(() => parseCsr('hello world')), 'ERR_PKI_PEM_EMPTY');
  assert.equal(codeOf(() => parseCsr(pemEncode('CERTIFICATE', good.der))), 'ERR_PKI_PEM_TYPE');
  assert.equal(codeOf(() => parseCsr('-----BEGIN CERTIFICATE REQUEST-----\n!!!!\n-----END CERTIFICATE REQUEST-----\n')), 'ERR_PKI_PEM_INVALID');
  assert.equal(codeOf(() => parseCsr('-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n')), 'ERR_PKI_PEM_INVALID');
  assert.equal(codeOf(() => parseCsr(good.pem + good.pem)), 'ERR_PKI_PEM_INVALID');
  assert.equal(codeOf(() => parseCsr(pemEncode('CERTIFICATE REQUEST', Buffer.from('garbage garbage')))), 'ERR_PKI_CSR_MALFORMED');
  assert.equal(codeOf(() => parseCsr(good.der.subarray(0, good.der.length - 5))), 'ERR_PKI_CSR_MALFORMED');
  assert.equal(codeOf(() => parseCsr(Buffer.concat([good.der, Buffer.from([0])]))), 'ERR_PKI_CSR_MALFORMED');
  assert.equal(codeOf(() => parseCsr(new Uint8Array([0x30, 0x80, 0, 0]))), 'ERR_PKI_CSR_MALFORMED');
  // Every single-byte truncation or corruption is a coded error, never a crash.
  for (let i = 0; i < good.der.length; i++) {
    const bad = Buffer.from(good.der);
    bad[i] = bad[i]! ^ 0x01;
    const code = codeOf(() => parseCsr(bad));
    assert.match(code, /^ERR_PKI_/, `byte ${i}`);
    assert.notEqual(code, 'no error', `byte ${i}`);
  }
  // A flipped bit in the signed part: structurally fine, signature fails.
  const der = Buffer.from(good.der);
  const uriAt = der.indexOf(Buffer.from('sleep'));
  der[uriAt] = 'x'.charCodeAt(0);
  assert.equal(codeOf(() => parseCsr(der)), 'ERR_PKI_CSR_SIGNATURE_INVALID');
  const r = await openssl(['req', '-in', await scratch.write('tampered.csr', pemEncode('CERTIFICATE REQUEST', der)), '-verify', '-noout']);
  // openssl 3.0 exits 0 here but says so on stderr.
  assert.match(r.stdout + r.stderr, /verify failure|did not match/i, 'openssl agrees the tampered CSR does not verify');
  assert.doesNotMatch(r.stdout + r.stderr, /verify OK/i);
  // A point that is not on the curve.
  const offCurve = Buffer.from(good.der);
  const spkiAt = offCurve.indexOf(Buffer.from('034200', 'hex')) + 3;
  offCurve[spkiAt + 40] = offCurve[spkiAt + 40]! ^ 0xff;
  assert.equal(codeOf(() => parseCsr(offCurve)), 'ERR_PKI_CSR_UNSUPPORTED_KEY');
  // Signed by a different key.
  const other = await generateKeyPair();
  const otherCsr = createCsr({ privateKey: other.privateKey, uri: ID }).der;
  const swapped = Buffer.from(good.der);
  const sigLen = good.der.length - (good.der.indexOf(Buffer.from('06082a8648ce3d040302', 'hex')) + 10);
  const otherSig = otherCsr.subarray(otherCsr.length - (otherCsr.length - (otherCsr.indexOf(Buffer.from('06082a8648ce3d040302', 'hex')) + 10)));
  if (otherSig.length === sigLen) {
    otherSig.copy(swapped, swapped.length - sigLen);
    assert.equal(codeOf(() => parseCsr(swapped)), 'ERR_PKI_CSR_SIGNATURE_INVALID');
  }
  assert.equal(csrDer(good.pem).equals(good.der), true);
});

test('fast CSR parse agrees with @peculiar/x509 on the SPKI and the signature verdict', async () => {
  const { x509 } = await import('../../src/pki/index.js');
  const specs = [undefined, { kind: 'ec', curve: 'P-384' } as const, { kind: 'rsa', bits: 2048 } as const];
  for (let i = 0; i < 12; i++) {
    const key = await generateKeyPair(specs[i % specs.length]);
    const der = Buffer.from(createCsr({ privateKey: key.privateKey, uri: `${ID}${i}` }).der);
    if (i % 2 === 1) {
      // Tamper inside the signed part (the URI), keeping the structure.
      const at = der.indexOf(Buffer.from(`sleep${i}`));
      der[at] = 'S'.charCodeAt(0);
    }
    const reference = await verifyCsrReference(der);
    let fastOk: boolean;
    try {
      const parsed = parseCsr(der);
      assert.equal(parsed.spki.equals(Buffer.from(new x509.Pkcs10CertificateRequest(der).publicKey.rawData)), true);
      fastOk = true;
    } catch (err) {
      assert.ok(err instanceof PkiError && err.code === 'ERR_PKI_CSR_SIGNATURE_INVALID', String(err));
      fastOk = false;
    }
    assert.equal(fastOk, reference, `case ${i}`);
    assert.equal(fastOk, i % 2 === 0, `case ${i}`);
  }
});

/** The rule csrDer applied before its one-pass scan: strip `\s`, then a strict base64 pattern. */
function strippedBodyRule(body: string): Buffer | 'ERR_PKI_PEM_INVALID' {
  const b64 = body.replace(/\s+/g, '');
  if (b64 === '' || b64.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return 'ERR_PKI_PEM_INVALID';
  return Buffer.from(b64, 'base64');
}

test('csrDer reads a PEM body exactly as stripping its whitespace and matching strict base64 did', async () => {
  const key = await generateKeyPair();
  const b64 = createCsr({ privateKey: key.privateKey, uri: ID }).der.toString('base64');
  const bodies = [
    b64,
    b64.replace(/(.{64})/g, '$1\n'),
    b64.replace(/(.{76})/g, '$1\r\n'),
    b64.replace(/(.{10})/g, '$1 \t'),
    b64.replace(/(.{33})/g, '$1\v\f'),
    b64.replace(/(.{20})/g, '$1\u00a0'),
    b64.replace(/(.{20})/g, '$1\u2028\u3000'),
    `\n\n${b64}\n\n`,
    b64.slice(0, -1),
    b64.slice(0, -2) + '=',
    b64 + '=',
    b64 + '====',
    b64.slice(0, 40) + '=' + b64.slice(41),
    b64.slice(0, 40) + '!' + b64.slice(41),
    b64.slice(0, 40) + '-' + b64.slice(41),
    b64.slice(0, 40) + '_' + b64.slice(41),
    b64.slice(0, 40) + 'é' + b64.slice(41),
    b64.slice(0, 40) + '\u0000' + b64.slice(41),
    '',
    ' \n\t ',
    '====',
    'AA==',
    'AA=\n=',
    'AA== \n',
    'A===',
    'AAA=',
    'AA=A',
  ];
  for (const [i, body] of bodies.entries()) {
    const pem = `-----BEGIN CERTIFICATE REQUEST-----\n${body}\n-----END CERTIFICATE REQUEST-----\n`;
    const want = strippedBodyRule(body);
    let got: Buffer | string;
    try {
      got = csrDer(pem);
    } catch (err) {
      got = err instanceof PkiError ? err.code : String(err);
    }
    if (typeof want === 'string') assert.equal(got, want, `body ${i}`);
    else assert.ok(Buffer.isBuffer(got) && got.equals(want), `body ${i}: same DER`);
  }
});
