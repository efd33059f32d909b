/**
 * The plugin's own check of the API server's certificate (server-chain.ts, api-tls.ts): the TLS
 * context has no trust store, so these cases are all that stands between the bearer token and a
 * server the kubeconfig does not trust. Real sockets, real openssl-made chains, the real client
 * (HttpsKubeClient) with kubeconfigs read by loadKubeconfig; the server counts every application
 * byte it receives, so a refused server must have seen none (no request line, no token).
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:https';
import type { TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HttpsKubeClient, KubeRequestError } from '../../../src/cni/plugin/kube-client.js';
import { loadKubeconfig } from '../../../src/cni/plugin/kubeconfig.js';
import { renderKubeconfigFile } from '../../../src/core/kubeconfig-file.js';
import { Secret } from '../../../src/core/secret.js';
import { systemClock, type Clock } from '../../../src/core/clock.js';
import { Scratch } from '../../support/scratch.js';
import { OpensslCerts, type OpensslCert } from '../../support/openssl-certs.js';
import { opensslMissing } from '../../support/tools.js';

const skip = opensslMissing();
const scratch = Scratch.forFile('cni-api-tls-');
const DAY_MS = 86_400_000;
const TOKEN = 'tok-must-not-leak';

let pki: OpensslCerts;
let root: OpensslCert;
let otherRoot: OpensslCert;
let clientRoot: OpensslCert;
const leaf: Record<string, OpensslCert> = {};

before(() => {
  if (skip) return;
  pki = new OpensslCerts(scratch.dir);
  root = pki.ca('root');
  otherRoot = pki.ca('other-root');
  clientRoot = pki.ca('client-root');
  leaf.good = pki.issue('good', root, { san: 'IP:127.0.0.1,DNS:localhost', eku: 'serverAuth' });
  leaf.wrongIp = pki.issue('wrong-ip', root, { san: 'IP:10.0.0.1,DNS:api.example', eku: 'serverAuth' });
  leaf.clientOnly = pki.issue('client-only', root, { san: 'IP:127.0.0.1', eku: 'clientAuth' });
  // CA:FALSE but keyUsage keyCertSign: only the basicConstraints check can refuse what it signs.
  const notCa = pki.issue('not-a-ca', root, { san: 'DNS:signer.example', keyUsage: 'digitalSignature,keyCertSign' });
  leaf.byNonCa = pki.issue('by-non-ca', notCa, { san: 'IP:127.0.0.1', eku: 'serverAuth' });
  leaf.nonCa = notCa;
  const inter = pki.issue('intermediate', root, { ca: true, days: 10 });
  leaf.inter = inter;
  leaf.viaInter = pki.issue('via-intermediate', inter, { san: 'IP:127.0.0.1', eku: 'serverAuth' });
  leaf.outlivesInter = pki.issue('outlives-intermediate', inter, { san: 'IP:127.0.0.1', eku: 'serverAuth', days: 20 });
  // Another key under the same name as the root, and a leaf it signed with no key identifier:
  // issuer names match, only the signature shows the root did not sign it.
  mkdirSync(join(scratch.dir, 'impostor'));
  const impostor = new OpensslCerts(join(scratch.dir, 'impostor'));
  leaf.forged = impostor.issue('forged', impostor.ca('root'), { san: 'IP:127.0.0.1', eku: 'serverAuth', authorityKeyId: false });
  const shortRoot = pki.ca('short-root', 5);
  leaf.outlivesRoot = pki.issue('outlives-root', shortRoot, { san: 'IP:127.0.0.1', eku: 'serverAuth', days: 20 });
  leaf.shortRoot = shortRoot;
  // root -> inter (pathlen 0) -> inter2 -> leaf: inter allows no intermediate below it.
  const inter0 = pki.issue('inter-pathlen-0', root, { ca: true, pathLen: 0, days: 10 });
  leaf.inter0 = inter0;
  leaf.inter0Child = pki.issue('below-pathlen-0', inter0, { ca: true, days: 10 });
  leaf.tooDeep = pki.issue('too-deep', leaf.inter0Child, { san: 'IP:127.0.0.1', eku: 'serverAuth' });
  // A root with pathlen 0 and an intermediate under it: the root allows none.
  const root0 = pki.ca('root-pathlen-0', 30, 0);
  leaf.root0 = root0;
  leaf.underRoot0 = pki.issue('under-root-pathlen-0', root0, { ca: true, days: 10 });
  leaf.viaRoot0 = pki.issue('via-root-pathlen-0', leaf.underRoot0, { san: 'IP:127.0.0.1', eku: 'serverAuth' });
  leaf.directRoot0 = pki.issue('direct-root-pathlen-0', root0, { san: 'IP:127.0.0.1', eku: 'serverAuth' });
  // CA:TRUE but keyUsage without keyCertSign: its signature on the leaf checks out, its key may not
  // sign certificates (checkIssued refuses the link; OpenSSL's X509_check_ca, X509Certificate.ca, too).
  leaf.noCertSign = pki.issue('no-cert-sign', root, { ca: true, keyUsage: 'digitalSignature', days: 10 });
  leaf.byNoCertSign = pki.issue('by-no-cert-sign', leaf.noCertSign, { san: 'IP:127.0.0.1', eku: 'serverAuth' });
  leaf.client = pki.issue('plugin-client', clientRoot, { eku: 'clientAuth' });
});

interface Api {
  readonly port: number;
  /** Application bytes received on any connection (request line, headers, token). */
  readonly bytes: () => number;
  readonly requests: Array<{ authorization: string | undefined; clientCn: string | undefined }>;
  close(): Promise<void>;
}

/** An HTTPS server that sends `chain` (leaf first) and answers every GET with a namespace. */
async function startApi(chain: readonly OpensslCert[], requireClientCert = false): Promise<Api> {
  let bytes = 0;
  const requests: Api['requests'] = [];
  const server: Server = createServer(
    {
      key: chain[0]!.keyPem,
      cert: chain.map((c) => c.certPem).join(''),
      ...(requireClientCert ? { requestCert: true, rejectUnauthorized: true, ca: clientRoot.certPem } : {}),
    },
    (req, res) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      requests.push({ authorization: req.headers.authorization, clientCn: peer && 'subject' in peer ? String(peer.subject?.CN) : undefined });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ metadata: { name: 'shop', labels: { team: 'a' } } }));
    },
  );
  server.on('secureConnection', (s: TLSSocket) => s.on('data', (d: Buffer) => (bytes += d.length)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    bytes: () => bytes,
    requests,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

let n = 0;
function tokenKubeconfig(server: string, ca: OpensslCert): string {
  const path = join(scratch.dir, `kc-${n++}.yaml`);
  writeFileSync(
    path,
    renderKubeconfigFile({ server, caPem: ca.certPem, token: new Secret(TOKEN), clusterName: 'k', userName: 'u', contextName: 'c' }),
  );
  return path;
}

function clientCertKubeconfig(server: string, ca: OpensslCert, client: OpensslCert): string {
  const path = join(scratch.dir, `kc-${n++}.json`);
  const b64 = (s: string): string => Buffer.from(s).toString('base64');
  writeFileSync(
    path,
    JSON.stringify({
      'current-context': 'c',
      contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
      clusters: [{ name: 'k', cluster: { server, 'certificate-authority-data': b64(ca.certPem) } }],
      users: [{ name: 'u', user: { 'client-certificate': client.certPath, 'client-key-data': b64(client.keyPem) } }],
    }),
  );
  return path;
}

const shifted = (ms: number): Clock => ({ now: () => Date.now() + ms, sleep: systemClock.sleep });

async function getNamespace(kubeconfig: string, clock: Clock = systemClock): Promise<Record<string, string>> {
  const client = new HttpsKubeClient({ access: await loadKubeconfig(kubeconfig), requestTimeoutMs: 10_000, clock });
  return (await client.getNamespace('shop')).labels;
}

/** The GET fails as an untrusted server (code 100) whose reason matches, and the server got no byte. */
async function refused(api: Api, kubeconfig: string, reason: RegExp, clock?: Clock): Promise<void> {
  await assert.rejects(getNamespace(kubeconfig, clock), (e: unknown) => {
    assert.ok(e instanceof KubeRequestError, String(e));
    assert.equal(e.failure, 'untrusted');
    assert.equal(e.code, 'ERR_CNI_KUBE_API');
    assert.match(e.message, reason);
    assert.doesNotMatch(e.message, new RegExp(TOKEN));
    return true;
  });
  assert.equal(api.bytes(), 0, 'no request byte may reach a server that is not trusted');
  assert.equal(api.requests.length, 0);
}

async function withApi(chain: readonly OpensslCert[], fn: (api: Api, url: string) => Promise<void>, requireClientCert = false): Promise<void> {
  const api = await startApi(chain, requireClientCert);
  try {
    await fn(api, `https://127.0.0.1:${api.port}`);
  } finally {
    await api.close();
  }
}

test('trusted: the configured CA signed the leaf for this IP; the token is sent', { skip }, () =>
  withApi([leaf.good!], async (api, url) => {
    assert.deepEqual(await getNamespace(tokenKubeconfig(url, root)), { team: 'a' });
    assert.equal(api.requests[0]?.authorization, `Bearer ${TOKEN}`);
  }));

test('trusted: a DNS name the leaf carries (localhost)', { skip }, () =>
  withApi([leaf.good!], async (api) => {
    assert.deepEqual(await getNamespace(tokenKubeconfig(`https://localhost:${api.port}`, root)), { team: 'a' });
  }));

test('trusted: a valid intermediate the server sends', { skip }, () =>
  withApi([leaf.viaInter!, leaf.inter!], async (_api, url) => {
    assert.deepEqual(await getNamespace(tokenKubeconfig(url, root)), { team: 'a' });
  }));

test('refused: another CA', { skip }, () =>
  withApi([leaf.good!], (api, url) => refused(api, tokenKubeconfig(url, otherRoot), /not signed by the configured CA/)));

test('refused: the right CA, but the leaf is for another IP', { skip }, () =>
  withApi([leaf.wrongIp!], (api, url) => refused(api, tokenKubeconfig(url, root), /IP: 127\.0\.0\.1 is not in the cert's list/)));

test('refused: the right CA, but the leaf is for another DNS name', { skip }, () =>
  withApi([leaf.wrongIp!], (api) => refused(api, tokenKubeconfig(`https://localhost:${api.port}`, root), /Host: localhost\. is not in the cert's altnames/)));

test('refused: an expired leaf (the plugin clock three days on)', { skip }, () =>
  withApi([leaf.good!], (api, url) => refused(api, tokenKubeconfig(url, root), /expired/, shifted(3 * DAY_MS))));

test('refused: a leaf not valid yet (the plugin clock a day back)', { skip }, () =>
  withApi([leaf.good!], (api, url) => refused(api, tokenKubeconfig(url, root), /not valid before/, shifted(-DAY_MS))));

test('refused: an intermediate that has expired while its leaf has not', { skip }, () =>
  // The intermediate runs 10 days, this leaf 20, the root 30: on day 11 only the intermediate has expired.
  withApi([leaf.outlivesInter!, leaf.inter!], (api, url) => refused(api, tokenKubeconfig(url, root), /CN=intermediate expired/, shifted(11 * DAY_MS))));

test('refused: the configured CA itself has expired while the leaf has not', { skip }, () =>
  withApi([leaf.outlivesRoot!], (api, url) => refused(api, tokenKubeconfig(url, leaf.shortRoot!), /CN=short-root expired/, shifted(6 * DAY_MS))));

test('refused: a leaf signed by a certificate that is not a CA (the signer sent along)', { skip }, () =>
  withApi([leaf.byNonCa!, leaf.nonCa!], (api, url) => refused(api, tokenKubeconfig(url, root), /not a CA/)));

test('refused: the configured certificate-authority is not a CA (CA:FALSE) though it signed the leaf', { skip }, () =>
  withApi([leaf.byNonCa!], (api, url) => refused(api, tokenKubeconfig(url, leaf.nonCa!), /not a CA/)));

test("refused: a leaf under the CA's name, signed by another key", { skip }, () =>
  withApi([leaf.forged!], (api, url) => refused(api, tokenKubeconfig(url, root), /not signed by the configured CA/)));

test("refused: more intermediates than an intermediate's pathLenConstraint allows", { skip }, () =>
  withApi([leaf.tooDeep!, leaf.inter0Child!, leaf.inter0!], (api, url) => refused(api, tokenKubeconfig(url, root), /allows 0 intermediates below it, the path has 1/)));

test("refused: an intermediate under a CA whose pathLenConstraint is 0; that CA's direct leaf is trusted", { skip }, async () => {
  await withApi([leaf.viaRoot0!, leaf.underRoot0!], (api, url) => refused(api, tokenKubeconfig(url, leaf.root0!), /CN=root-pathlen-0 allows 0 intermediates/));
  await withApi([leaf.directRoot0!], async (_api, url) => {
    assert.deepEqual(await getNamespace(tokenKubeconfig(url, leaf.root0!)), { team: 'a' });
  });
});

test('refused: an intermediate whose keyUsage does not allow keyCertSign', { skip }, () =>
  withApi([leaf.byNoCertSign!, leaf.noCertSign!], (api, url) => refused(api, tokenKubeconfig(url, root), /not signed by the configured CA/)));

test('refused: an intermediate the server does not send', { skip }, () =>
  withApi([leaf.viaInter!], (api, url) => refused(api, tokenKubeconfig(url, root), /not signed by the configured CA/)));

test('refused: a leaf whose extendedKeyUsage does not allow serverAuth', { skip }, () =>
  withApi([leaf.clientOnly!], (api, url) => refused(api, tokenKubeconfig(url, root), /serverAuth/)));

test('client-certificate kubeconfig: trusted server gets the client certificate; untrusted gets nothing', { skip }, async () => {
  await withApi(
    [leaf.good!],
    async (api, url) => {
      assert.deepEqual(await getNamespace(clientCertKubeconfig(url, root, leaf.client!)), { team: 'a' });
      assert.deepEqual(api.requests, [{ authorization: undefined, clientCn: 'plugin-client' }]);
    },
    true,
  );
  await withApi([leaf.good!], (api, url) => refused(api, clientCertKubeconfig(url, otherRoot, leaf.client!), /not signed by the configured CA/), true);
});

test('a certificate-authority that holds no certificate is an invalid config (7)', { skip }, () => {
  assert.throws(
    () => new HttpsKubeClient({ access: { server: new URL('https://127.0.0.1:1'), caPem: 'not a PEM', insecureSkipTlsVerify: false, token: undefined, clientCert: undefined }, requestTimeoutMs: 1000 }),
    (e: unknown) => e instanceof Error && 'code' in e && e.code === 'ERR_CNI_INVALID_CONFIG',
  );
});
