/**
 * The step-ca signer's pure parts: its settings (every problem listed with the CA's others), the
 * provisioner key file (JWK, PBES2 JWE with a password, what is refused), the one-time token's
 * claims as step-ca 0.19 reads them, step-ca's statuses and answers, and the answer check the
 * step-ca signer shares with kubernetes-csr (csr-answer.ts) for what step-ca issues.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { calculateJwkThumbprint, decodeJwt, decodeProtectedHeader, jwtVerify, importJWK } from 'jose';
import { ConfigError } from '../../src/core/config.js';
import {
  chainFromCsrAnswer,
  issueServingCertificate,
  codeForStatus,
  parseSignAnswer,
  readCaConfig,
  readProvisionerKey,
  signToken,
  STEP_CA_TOKEN_TTL_SECONDS,
  type CaCliFlags,
} from '../../src/ca/index.js';
import { caKeyMaterial, createCsr, exportSpkiDer, FastLeafIssuer, generateKeyPair, parsePrivateKeyPem } from '../../src/pki/index.js';
import { encryptJwk, makeProvisionerKey } from '../support/step-ca.js';
import { makePluginCa } from './support/pki-fixtures.js';
import { rejectionCode, thrownCode } from './support/error-code.js';

function problems(env: Record<string, string>, flags: CaCliFlags = {}): readonly string[] {
  try {
    readCaConfig(flags, env);
    return [];
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems;
  }
}

test('--signer step-ca without its settings lists every missing one, with the CA\'s other problems', () => {
  const listed = problems({ MAX_WORKLOAD_CERT_TTL_SECONDS: 'ten' }, { signer: 'step-ca' });
  for (const name of ['CA_STEP_CA_URL (--step-ca-url)', 'CA_STEP_CA_ROOT (--step-ca-root)', 'CA_STEP_CA_PROVISIONER (--provisioner)', 'CA_STEP_CA_PROVISIONER_KEY_FILE (--provisioner-key-file)']) {
    assert.ok(listed.some((p) => p.startsWith(name)), `${name} in ${JSON.stringify(listed)}`);
  }
  assert.ok(listed.some((p) => p.includes('MAX_WORKLOAD_CERT_TTL_SECONDS')));
});

test('step-ca settings: an http:// URL and a timeout out of range are refused; flags win over env', () => {
  const base = { CA_SIGNER: 'step-ca', CA_STEP_CA_ROOT: '/r.pem', CA_STEP_CA_PROVISIONER: 'p', CA_STEP_CA_PROVISIONER_KEY_FILE: '/k.json' };
  const listed = problems({ ...base, CA_STEP_CA_URL: 'http://ca:9000', CA_STEP_CA_TIMEOUT_SECONDS: '0' });
  assert.equal(listed.length, 2, JSON.stringify(listed));
  assert.match(listed[0]!, /must be an https:\/\/ URL/);
  const cfg = readCaConfig({ stepCaUrl: 'https://ca.example:9000', provisioner: 'from-flag' }, { ...base, CA_STEP_CA_URL: 'https://other' });
  assert.equal(cfg.signerKind, 'step-ca');
  assert.deepEqual(cfg.stepCa, { url: 'https://ca.example:9000', rootFile: '/r.pem', provisioner: 'from-flag', provisionerKeyFile: '/k.json', timeoutMs: 10_000 });
  assert.equal(readCaConfig({}, {}).stepCa, undefined, 'no step-ca settings for another signer');
});

test('the provisioner key: a private JWK, or its PBES2 JWE with the password; kid from the file, else the thumbprint', async () => {
  const { kid, privateJwk } = await makeProvisionerKey();
  const plain = await readProvisionerKey('certbroker', JSON.stringify(privateJwk));
  assert.equal(plain.kid, kid);
  assert.equal(plain.alg, 'ES256');
  const jwe = await encryptJwk(privateJwk, 'hunter2');
  const decrypted = await readProvisionerKey('certbroker', `${jwe}\n`, new TextEncoder().encode('hunter2'));
  assert.equal(decrypted.kid, kid);
  const { kid: _kid, alg: _alg, ...bare } = privateJwk;
  const withoutKid = await readProvisionerKey('certbroker', JSON.stringify(bare));
  assert.equal(withoutKid.kid, await calculateJwkThumbprint(bare, 'sha256'));
  assert.equal(withoutKid.alg, 'ES256', 'from the curve');
  const refused = async (text: string, password?: string) => rejectionCode(readProvisionerKey('p', text, password === undefined ? undefined : new TextEncoder().encode(password)));
  assert.equal(await refused(jwe, 'wrong'), 'ERR_CA_SIGNER_MATERIAL_INVALID');
  assert.equal(await refused(jwe), 'ERR_CA_SIGNER_MATERIAL_INVALID', 'an encrypted key without a password');
  const { d: _d, ...publicOnly } = privateJwk;
  assert.equal(await refused(JSON.stringify(publicOnly)), 'ERR_CA_SIGNER_MATERIAL_INVALID', 'a public key');
  assert.equal(await refused('{"kty":'), 'ERR_CA_SIGNER_MATERIAL_INVALID');
});

test('the one-time token carries what step-ca checks: kid header, iss, aud, sub, sans, nbf/iat/exp, a fresh jti; it verifies with the public key', async () => {
  const { publicJwk, privateJwk } = await makeProvisionerKey();
  const key = await readProvisionerKey('certbroker', JSON.stringify(privateJwk));
  const nowMs = 1_800_000_000_500;
  const claims = { audience: 'https://ca:9000/1.0/sign', subject: 'spiffe://td/ns/a/sa/b', sans: ['spiffe://td/ns/a/sa/b', 'localhost'], nowMs };
  const token = await signToken(key, claims);
  assert.deepEqual(decodeProtectedHeader(token), { alg: 'ES256', kid: publicJwk.kid, typ: 'JWT' });
  const body = decodeJwt(token);
  assert.equal(body.iss, 'certbroker');
  assert.equal(body.aud, 'https://ca:9000/1.0/sign');
  assert.equal(body.sub, 'spiffe://td/ns/a/sa/b');
  assert.deepEqual(body.sans, ['spiffe://td/ns/a/sa/b', 'localhost']);
  assert.equal(body.nbf, 1_800_000_000);
  assert.equal(body.iat, 1_800_000_000);
  assert.equal(body.exp, 1_800_000_000 + STEP_CA_TOKEN_TTL_SECONDS);
  assert.match(String(body.jti), /^[0-9a-f]{32}$/);
  assert.notEqual(decodeJwt(await signToken(key, claims)).jti, body.jti, 'one jti per token');
  await jwtVerify(token, await importJWK(publicJwk, 'ES256'), { currentDate: new Date(nowMs), issuer: 'certbroker', audience: claims.audience });
});

test('step-ca statuses map to closed codes; a SignResponse is read from certChain, or crt + ca', () => {
  assert.equal(codeForStatus(400), 'ERR_CA_STEP_CA_BAD_REQUEST');
  assert.equal(codeForStatus(401), 'ERR_CA_STEP_CA_UNAUTHORIZED');
  assert.equal(codeForStatus(403), 'ERR_CA_STEP_CA_REFUSED');
  assert.equal(codeForStatus(500), 'ERR_CA_STEP_CA_UNAVAILABLE');
  assert.equal(codeForStatus(503), 'ERR_CA_STEP_CA_UNAVAILABLE');
  assert.deepEqual(parseSignAnswer('{"crt":"L","ca":"I","certChain":["L","I"]}', 'x'), { leafPem: 'L', intermediatePems: ['I'] });
  assert.deepEqual(parseSignAnswer('{"crt":"L","ca":"I"}', 'x'), { leafPem: 'L', intermediatePems: ['I'] });
  assert.equal(thrownCode(() => parseSignAnswer('<html>', 'x')), 'ERR_CA_STEP_CA_BAD_ANSWER');
  assert.equal(thrownCode(() => parseSignAnswer('{"certChain":[]}', 'x')), 'ERR_CA_STEP_CA_BAD_ANSWER');
});

test('the answer check (csr-answer, shared with kubernetes-csr): a DNS-only serving certificate passes without SVID rules; an SVID must carry the serving names asked', async () => {
  const ca = await makePluginCa('Answer');
  const material = caKeyMaterial({ cert: ca.intermediate.cert, keyObject: ca.intermediate.privateKey, chain: [ca.root.cert], roots: [ca.root.cert] });
  const base = { roots: [ca.root.cert], rootsPem: ca.root.pem, nowMs: Date.now(), csrName: 'test' };
  const serving = await issueServingCertificate(material, { dnsNames: ['localhost', '127.0.0.1'], ttlSeconds: 3600, nowMs: Date.now() });
  const servingSpki = exportSpkiDer(parsePrivateKeyPem(serving.privateKeyPem.reveal()));
  const chain = chainFromCsrAnswer({ ...base, certificatePem: serving.certChainPem, csrSpki: servingSpki, expect: { servingNames: ['localhost', '127.0.0.1'] } });
  assert.equal(chain.certChain.length, 3, 'leaf, intermediate, roots');
  assert.equal(thrownCode(() => chainFromCsrAnswer({ ...base, certificatePem: serving.certChainPem, csrSpki: servingSpki, expect: { servingNames: ['other.example'] } })), 'ERR_CA_CSR_BAD_CERTIFICATE');
  const id = 'spiffe://cluster.local/ns/istio-system/sa/ztunnel';
  const { privateKey } = await generateKeyPair();
  const leaf = new FastLeafIssuer({ signer: material.leafSigner }).issue({ csr: createCsr({ privateKey, uri: id }).pem, spiffeId: id, ttlSeconds: 3600 });
  const svid = { ...base, certificatePem: leaf.pem + ca.intermediate.pem, csrSpki: exportSpkiDer(privateKey) };
  assert.equal(chainFromCsrAnswer({ ...svid, expect: { spiffeId: id } }).certChain.length, 3);
  assert.equal(thrownCode(() => chainFromCsrAnswer({ ...svid, expect: { spiffeId: id, servingNames: ['localhost'] } })), 'ERR_CA_CSR_BAD_CERTIFICATE', 'a serving name asked is missing');
  assert.equal(thrownCode(() => chainFromCsrAnswer({ ...svid, expect: { spiffeId: 'spiffe://cluster.local/ns/default/sa/other' } })), 'ERR_CA_CSR_BAD_CERTIFICATE');
});
