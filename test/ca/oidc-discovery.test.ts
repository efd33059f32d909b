/**
 * The CA's own Kubernetes token on OIDC fetches: sent to the Kubernetes API server's origin
 * only, never to a `jwks_uri` (or issuer) on another origin. Two real HTTPS servers on
 * loopback: "apiserver" serves the discovery document, "jwks" (another port, so another origin)
 * serves the keys; both record the authorization header they receive.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, jwtVerify, SignJWT } from 'jose';
import { Secret } from '../../src/core/secret.js';
import { discoveredJwks, kubeCredentialsAllowedForOidc, oidcFetchOrigin } from '../../src/ca/index.js';
import { makeServingMaterial } from '../../src/devcluster/serving-cert.js';

const ISSUER = 'https://issuer.example';
const CA_TOKEN = 'ca-kube-token-do-not-leak';
let caPem: string;
let apiserver: { url: string; seen: Array<string | undefined>; server: Server };
let jwks: { url: string; seen: Array<string | undefined>; server: Server };
let token: string;

async function serve(material: { certPem: string; keyPem: string }, body: (url: string) => unknown): Promise<{ url: string; seen: Array<string | undefined>; server: Server }> {
  const seen: Array<string | undefined> = [];
  const server = createServer({ cert: material.certPem, key: material.keyPem }, (req, res) => {
    seen.push(req.headers.authorization);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(body(req.url ?? '')));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

before(async () => {
  const material = await makeServingMaterial({ hosts: ['127.0.0.1'], nowMs: Date.now() });
  caPem = material.caCertPem;
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  jwks = await serve(material, () => ({ keys: [jwk] }));
  apiserver = await serve(material, (url) => (url.startsWith('/.well-known/') ? { issuer: ISSUER, jwks_uri: `${jwks.url}/openid/v1/jwks` } : { keys: [jwk] }));
  token = await new SignJWT({ sub: 'system:serviceaccount:istio-system:ztunnel' })
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setIssuer(ISSUER)
    .setAudience('istio-ca')
    .setExpirationTime('1h')
    .sign(privateKey);
});

after(() => {
  apiserver?.server.close();
  jwks?.server.close();
});

test('discovery at the API server gets the CA token; the jwks_uri on another origin does not', async () => {
  apiserver.seen.length = 0;
  jwks.seen.length = 0;
  const keys = discoveredJwks({ issuer: ISSUER, discoveryUrl: apiserver.url, caPem, bearerToken: () => new Secret(CA_TOKEN), bearerTokenOrigin: apiserver.url });
  const { payload } = await jwtVerify(token, keys, { issuer: ISSUER, audience: 'istio-ca' });
  assert.equal(payload.sub, 'system:serviceaccount:istio-system:ztunnel');
  assert.deepEqual(apiserver.seen, [`Bearer ${CA_TOKEN}`]);
  assert.ok(jwks.seen.length >= 1, 'the keys were fetched from the other origin');
  assert.deepEqual(jwks.seen, jwks.seen.map(() => undefined), 'no authorization header off the API server');
});

test('without an explicit origin the token goes only where discovery starts', async () => {
  apiserver.seen.length = 0;
  jwks.seen.length = 0;
  const keys = discoveredJwks({ issuer: ISSUER, discoveryUrl: apiserver.url, caPem, bearerToken: () => new Secret(CA_TOKEN) });
  await jwtVerify(token, keys, { issuer: ISSUER, audience: 'istio-ca' });
  assert.deepEqual(apiserver.seen, [`Bearer ${CA_TOKEN}`]);
  assert.ok(jwks.seen.length >= 1 && jwks.seen.every((h) => h === undefined), JSON.stringify(jwks.seen));
});

test('an API server origin that is neither: no fetch carries the token', async () => {
  apiserver.seen.length = 0;
  jwks.seen.length = 0;
  const keys = discoveredJwks({ issuer: ISSUER, discoveryUrl: apiserver.url, caPem, bearerToken: () => new Secret(CA_TOKEN), bearerTokenOrigin: 'https://kubernetes.example:6443' });
  await jwtVerify(token, keys, { issuer: ISSUER, audience: 'istio-ca' });
  assert.ok([...apiserver.seen, ...jwks.seen].every((h) => h === undefined));
});

test('certbroker ca sends its Kubernetes credentials only when OIDC fetches start at the API server', () => {
  const api = 'https://10.0.0.1:6443';
  assert.equal(kubeCredentialsAllowedForOidc({ apiServerUrl: api, issuer: 'https://kubernetes.default.svc', discoveryUrl: `${api}/` }), true);
  assert.equal(kubeCredentialsAllowedForOidc({ apiServerUrl: api, issuer: api }), true);
  assert.equal(kubeCredentialsAllowedForOidc({ apiServerUrl: api, issuer: 'https://oidc.example/cluster' }), false, 'a public issuer is a third party');
  assert.equal(kubeCredentialsAllowedForOidc({ apiServerUrl: api, issuer: api, jwksUri: 'https://keys.example/jwks' }), false);
  assert.equal(kubeCredentialsAllowedForOidc({ apiServerUrl: 'https://10.0.0.1:6444', issuer: api }), false, 'another port is another origin');
  assert.equal(kubeCredentialsAllowedForOidc({ apiServerUrl: 'http://10.0.0.1:6443', issuer: api }), false, 'another scheme is another origin');
  assert.equal(kubeCredentialsAllowedForOidc({ apiServerUrl: undefined, issuer: api }), false);
  assert.equal(oidcFetchOrigin({ issuer: 'https://a.example/x', discoveryUrl: 'https://b.example:8443/y' }), 'https://b.example:8443');
});
