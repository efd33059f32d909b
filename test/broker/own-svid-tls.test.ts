/**
 * The Broker API's serving identity over a real Unix socket and real TLS handshakes: it never
 * presents a certificate past its notAfter. The probe (support/tls-probe.ts) accepts any server
 * certificate, so it sees whatever the server presents; expiry is decided by the broker's clock
 * (a FakeClock here; real certificates, real time for TLS).
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeClock } from '../support/fake-clock.js';
import { silentLogger } from '../../src/core/log.js';
import { type BrokerApiServer, BrokerApiService, CertManager, NodePods, SelfCertificateProvider, startBrokerApiServer, TrustBundle, type WorkloadCert, workloadCertPem } from '../../src/broker/index.js';
import { probeHandshake, type Handshake } from './support/tls-probe.js';
import { caKeyMaterial, createCsr, createRootCa, exportPkcs8Der, FastLeafIssuer, generateKeyPair, type CaCertificate } from '../../src/pki/index.js';
import { tempDirSync } from '../support/scratch.js';

const HOUR = 3_600_000;
const BROKER_ID = 'spiffe://cluster.local/ns/istio-system/sa/certbroker-node';
const ZTUNNEL = 'spiffe://cluster.local/ns/istio-system/sa/ztunnel';

describe('Broker API serving identity: nothing expired is ever presented (real TLS)', () => {
  let root: CaCertificate;
  let dir: string;
  let consumer: WorkloadCert;
  const servers: BrokerApiServer[] = [];
  const providers: SelfCertificateProvider[] = [];

  /** A real leaf for `identity`, issued as if at `issuedAt`, valid `ttlSeconds`. */
  const leaf = async (identity: string, issuedAt: number, ttlSeconds: number): Promise<WorkloadCert> => {
    const issuer = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner, now: () => issuedAt });
    const { privateKey } = await generateKeyPair();
    const issued = issuer.issue({ csr: createCsr({ privateKey, uri: identity }).der, spiffeId: identity, ttlSeconds });
    return {
      identity,
      chainDer: [Buffer.from(issued.der)],
      rootsDer: [Buffer.from(root.der)],
      privateKey: exportPkcs8Der(privateKey),
      serial: issued.serialHex.toLowerCase(),
      notBefore: issued.notBeforeMs,
      notAfter: issued.notAfterMs,
    };
  };

  const start = async (name: string, provider: SelfCertificateProvider): Promise<string> => {
    const clock = new FakeClock();
    const certs = new CertManager({ ca: { fetchCertificate: () => Promise.reject(new Error('no CA in this test')) }, clock, rng: () => 0.5 });
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs, now: () => clock.now() });
    const bundle = new TrustBundle('cluster.local', [Buffer.from(root.der)]);
    provider.setRoots(bundle);
    const service = new BrokerApiService({ pods, certs, bundle, allowedCallers: [ZTUNNEL], clock, rng: () => 0.5, logger: silentLogger, updateJitterMs: 0 });
    const socketPath = join(dir, name, 'broker.sock');
    servers.push(await startBrokerApiServer({ socketPath, service, certificates: provider, logger: silentLogger }));
    providers.push(provider);
    return socketPath;
  };

  const handshake = (socketPath: string): Promise<Handshake> => probeHandshake(socketPath, { rootsPem: root.pem, ...workloadCertPem(consumer) });

  before(async () => {
    root = await createRootCa({ subject: 'CN=test mesh root', ttlSeconds: 86400 });
    dir = tempDirSync('own-svid-tls-');
    consumer = await leaf(ZTUNNEL, Date.now(), 3600);
  });

  after(async () => {
    try {
      for (const p of providers) p.close();
      await Promise.all(servers.map((s) => s.stop(100)));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('an identity already past notAfter is never taken: every handshake is refused, the expired certificate never reaches the client', async () => {
    const expired = await leaf(BROKER_ID, Date.now() - 2 * HOUR, 3600);
    assert.ok(expired.notAfter < Date.now());
    const provider = new SelfCertificateProvider();
    assert.equal(provider.setIdentity(expired), false);
    assert.equal(provider.hasIdentity, false);
    const socketPath = await start('expired', provider);
    for (let i = 0; i < 3; i++) {
      const h = await handshake(socketPath);
      assert.equal(h.ok, false, `handshake ${i} completed and presented serial ${h.ok ? h.serial : ''} (expired ${expired.serial})`);
    }
  });

  it("withdraws the identity at its notAfter by the broker's clock (handshakes refused), and serves the renewal", async () => {
    const clock = new FakeClock(Date.now());
    const expiredEvents: string[] = [];
    const provider = new SelfCertificateProvider({ clock, onExpired: (c) => expiredEvents.push(c.serial) });
    const first = await leaf(BROKER_ID, clock.now(), 3600);
    assert.equal(provider.setIdentity(first), true);
    const socketPath = await start('rotating', provider);

    const served = await handshake(socketPath);
    assert.deepEqual(served.ok && served.serial, first.serial);
    assert.equal(provider.servingNotAfter, first.notAfter);

    await clock.advance(first.notAfter - clock.now() - 1);
    assert.equal((await handshake(socketPath)).ok, true, 'still valid 1 ms before notAfter');
    await clock.advance(1);
    assert.deepEqual(expiredEvents, [first.serial]);
    assert.equal(provider.hasIdentity, false);
    assert.equal(provider.servingNotAfter, undefined);
    const refused = await handshake(socketPath);
    assert.equal(refused.ok, false, `presented ${refused.ok ? refused.serial : ''} after its notAfter`);

    // Valid by both clocks (the broker's is an hour ahead of real time by now).
    const renewed = await leaf(BROKER_ID, Date.now(), 3 * 3600);
    assert.equal(provider.setIdentity(renewed), true);
    const again = await handshake(socketPath);
    assert.deepEqual(again.ok && again.serial, renewed.serial);
    assert.ok(again.ok && again.validTo > clock.now());
  });
});
