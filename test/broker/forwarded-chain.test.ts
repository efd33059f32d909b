/**
 * `checkForwardedChain`, the Istio CA front's check of a relayed CA answer: accepted only with
 * the one URI SAN asked for, a leaf that is not a CA, signed by the next certificate (the
 * intermediate when there is one, else a root of the bundle); the leaf's SPKI returned.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { checkForwardedChain } from '../../src/broker/index.js';
import { caKeyMaterial, createCsr, createIntermediateCa, createRootCa, FastLeafIssuer, generateKeyPair } from '../../src/pki/index.js';

const ID = 'spiffe://cluster.local/ns/shop/sa/cart';

test('accepts leaf + root bundle and leaf + intermediate + root; refuses another SAN, a CA leaf, a leaf of another signer, a short chain', async () => {
  const root = await createRootCa({ subject: 'CN=root', ttlSeconds: 86400 });
  const other = await createRootCa({ subject: 'CN=other', ttlSeconds: 86400 });
  const inter = await createIntermediateCa({ subject: 'CN=inter', ttlSeconds: 86400, issuer: { cert: root.cert, privateKey: root.privateKey } });
  const fromRoot = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner });
  const fromInter = new FastLeafIssuer({ signer: caKeyMaterial({ cert: inter.cert, keyObject: inter.privateKey, roots: [root.cert] }).leafSigner });
  const { privateKey } = await generateKeyPair();
  const csr = createCsr({ privateKey, uri: ID }).pem;
  const leaf = await fromRoot.issueAsync({ csr, spiffeId: ID, ttlSeconds: 3600 });
  const interLeaf = await fromInter.issueAsync({ csr, spiffeId: ID, ttlSeconds: 3600 });

  const ok = checkForwardedChain({ cert_chain: [leaf.pem, other.pem + root.pem] }, ID);
  assert.deepEqual(ok.certChain, [leaf.pem, other.pem + root.pem], 'the chain as it came');
  assert.ok(ok.leafSpki.equals(new X509Certificate(leaf.pem).publicKey.export({ type: 'spki', format: 'der' })));
  assert.ok(checkForwardedChain({ cert_chain: [interLeaf.pem, inter.pem, root.pem] }, ID));

  const code = (chain: string[], id = ID) => {
    try {
      checkForwardedChain({ cert_chain: chain }, id);
      return 'accepted';
    } catch (err) {
      return (err as { code?: string }).code;
    }
  };
  assert.equal(code([leaf.pem, root.pem], 'spiffe://cluster.local/ns/shop/sa/web'), 'ERR_CA_SAN_MISMATCH');
  assert.equal(code([inter.pem, root.pem], 'spiffe://cluster.local'), 'ERR_CA_SAN_MISMATCH', 'no URI SAN at all');
  assert.equal(code([leaf.pem, other.pem]), 'ERR_CA_BAD_RESPONSE', 'the root bundle did not sign it');
  assert.equal(code([interLeaf.pem, other.pem, root.pem]), 'ERR_CA_BAD_RESPONSE', 'the first intermediate must be the signer');
  assert.equal(code([leaf.pem]), 'ERR_CA_BAD_RESPONSE');
  assert.equal(code(['garbage', root.pem]), 'ERR_CA_BAD_RESPONSE');
  assert.equal(code([leaf.pem + leaf.pem, root.pem]), 'ERR_CA_BAD_RESPONSE', 'one leaf per element');
});

test('refuses a leaf that is a CA even when it carries the identity', async () => {
  const root = await createRootCa({ subject: 'CN=root', ttlSeconds: 86400 });
  const { makeCustomCert, basicConstraints, keyUsage, KU, uriSan } = await import('../pki/fixtures.js');
  const key = await generateKeyPair();
  const caLeaf = await makeCustomCert({
    issuer: { cert: root.cert, privateKey: root.privateKey },
    subject: '',
    publicKey: key.publicKey,
    extensions: [keyUsage(KU.digitalSignature | KU.keyCertSign), basicConstraints(true), uriSan([ID])],
  });
  const { pemEncode } = await import('../../src/pki/index.js');
  assert.throws(() => checkForwardedChain({ cert_chain: [pemEncode('CERTIFICATE', new Uint8Array(caLeaf.rawData)), root.pem] }, ID), { code: 'ERR_CA_LEAF_NOT_SVID' });
});
