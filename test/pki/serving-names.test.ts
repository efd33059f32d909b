/**
 * Serving names on a leaf (a node broker's SVID that also serves TLS on `localhost`): the fast
 * template writes the same TBSCertificate as @peculiar/x509 with DNS and IP SANs before the URI,
 * the leaf stays an X509-SVID, and openssl verifies it for the host name and the addresses.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import {
  buildLeafReference,
  caKeyMaterial,
  canonicalServingName,
  createCsr,
  createRootCa,
  encodeServingNames,
  FastLeafIssuer,
  generateKeyPair,
  ipAddressBytes,
  LeafTemplate,
  MAX_SERVING_NAMES,
  parseCsr,
  pemEncode,
  servingNameProblem,
  type LeafPlan,
} from '../../src/pki/index.js';
import { positiveIntegerContent } from '../../src/pki/der.js';
import { x509SvidProblems } from '../../src/spiffe/index.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const scratch = Scratch.forFile();
const ID = 'spiffe://cluster.local/ns/istio-system/sa/ztunnel';

test('serving names: IP and DNS recognised, everything else refused with a reason', () => {
  for (const ok of ['localhost', 'LocalHost', 'node-ca.istio-system.svc', '127.0.0.1', '::1', 'fd00::a:1', '::ffff:10.0.0.1']) assert.equal(servingNameProblem(ok), undefined, ok);
  for (const bad of ['', '*.svc', 'a..b', '-x', 'x-', 'trailing.', 'sp ace', 'a_b', '1.2.3.4.5:', `${'a'.repeat(64)}.x`, 'spiffe://x/y', '[::1]']) {
    assert.match(servingNameProblem(bad) ?? '', /neither an IP address nor a DNS host name/, bad);
  }
  assert.deepEqual([...ipAddressBytes('127.0.0.1')], [127, 0, 0, 1]);
  assert.equal(ipAddressBytes('::1').toString('hex'), '00000000000000000000000000000001');
  assert.equal(ipAddressBytes('fd00::a:1').toString('hex'), 'fd0000000000000000000000000a0001');
  assert.equal(ipAddressBytes('::ffff:10.0.0.1').toString('hex'), '00000000000000000000ffff0a000001');
  assert.equal(ipAddressBytes('1:2:3:4:5:6:7:8').toString('hex'), '00010002000300040005000600070008');
  // One spelling per address, DNS case-insensitive.
  assert.equal(canonicalServingName('0:0:0:0:0:0:0:1'), canonicalServingName('::1'));
  assert.equal(canonicalServingName('LOCALHOST'), canonicalServingName('localhost'));
  assert.notEqual(canonicalServingName('127.0.0.1'), canonicalServingName('::ffff:127.0.0.1'));
  assert.throws(() => encodeServingNames(Array.from({ length: MAX_SERVING_NAMES + 1 }, (_, i) => `n${i}.local`)), { code: 'ERR_PKI_CERT_INVALID' });
  assert.throws(() => encodeServingNames(['*.local']), { code: 'ERR_PKI_CERT_INVALID' });
});

test('fast TBSCertificate with serving names == @peculiar/x509; DNS names first, then IPs, then the URI; still an X509-SVID', { skip: opensslMissing() }, async () => {
  const root = await createRootCa({ subject: 'O=cluster.local, CN=Root', ttlSeconds: 10 * 365 * 86400 });
  const material = caKeyMaterial({ cert: root.cert, keyObject: root.privateKey });
  const template = new LeafTemplate(material.leafSigner);
  const key = await generateKeyPair();
  const spki = parseCsr(createCsr({ privateKey: key.privateKey, uri: ID }).pem).spki;
  const plan: LeafPlan = { serial: positiveIntegerContent(Buffer.from('0123456789abcdef0123456789abcdef', 'hex')), notBeforeMs: Date.UTC(2026, 0, 1), notAfterMs: Date.UTC(2026, 0, 2) };
  const cases: readonly (readonly string[])[] = [
    ['localhost'],
    ['127.0.0.1', 'localhost', '::1'],
    ['Node-CA.istio-system.svc', 'localhost', '10.0.0.7', 'fd00::7'],
    [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}`, '127.0.0.1'],
  ];
  for (const names of cases) {
    const fast = template.buildTbs(plan, spki, ID, encodeServingNames(names));
    const ref = await buildLeafReference({ plan, spki, uri: ID, signer: material.leafSigner, servingNames: names });
    assert.equal(fast.toString('hex'), ref.tbs.toString('hex'), names.join(','));
  }
  const issuer = new FastLeafIssuer({ signer: material.leafSigner });
  const leaf = await issuer.issueAsync({ csr: createCsr({ privateKey: key.privateKey, uri: ID }).pem, spiffeId: ID, ttlSeconds: 3600, servingNames: ['127.0.0.1', 'localhost', '::1'] });
  const cert = new X509Certificate(leaf.pem);
  assert.equal(cert.subjectAltName, `DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, URI:${ID}`);
  assert.deepEqual(x509SvidProblems(Buffer.from(leaf.der), { role: 'leaf' }).problems.map((p) => p.code), []);
  // Without serving names the leaf is exactly istiod's: one URI SAN.
  const plain = await issuer.issueAsync({ csr: createCsr({ privateKey: key.privateKey, uri: ID }).pem, spiffeId: ID, ttlSeconds: 3600, servingNames: [] });
  assert.equal(new X509Certificate(plain.pem).subjectAltName, `URI:${ID}`);

  const rootFile = await scratch.write('root.pem', root.pem);
  const leafFile = await scratch.write('leaf.pem', pemEncode('CERTIFICATE', leaf.der));
  for (const check of [['-verify_hostname', 'localhost'], ['-verify_ip', '127.0.0.1'], ['-verify_ip', '::1']]) {
    const r = await openssl(['verify', '-x509_strict', '-purpose', 'sslserver', ...check, '-CAfile', rootFile, leafFile]);
    assert.equal(r.code, 0, `${check.join(' ')}: ${r.stdout}${r.stderr}`);
  }
  const wrong = await openssl(['verify', '-purpose', 'sslserver', '-verify_hostname', 'istiod.istio-system.svc', '-CAfile', rootFile, leafFile]);
  assert.notEqual(wrong.code, 0, 'a name the leaf does not carry fails the check');
  assert.match(wrong.stdout + wrong.stderr, /hostname mismatch/);
});
