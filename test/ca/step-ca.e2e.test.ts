/**
 * The CA on the step-ca signer, end to end against a real step-ca process (built from Debian's
 * smallstep sources, test/support/step-ca.ts) and a real devcluster: the CA authenticates and
 * node-authorizes, step-ca signs through its JWK provisioner's SPIFFE template, the CA checks the
 * leaf and answers; refusals, step-ca down and back, step-ca hung (plain TCP and TLS), a wrong
 * provisioner key, and the Python grpcio client through the CA. Skipped, with the reason, where
 * Go, gcc, libzstd or the smallstep sources are not installed.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { status } from '@grpc/grpc-js';
import type { CaServer, SignerConfig } from '../../src/ca/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { startHungServer, silentTlsMaterial, type HungServer } from '../support/hung-server.js';
import { Scratch } from '../support/scratch.js';
import { encryptJwk, makeProvisionerKey, startStepCa, stepCaMissing, type StepCa } from '../support/step-ca.js';
import { opensslMissing, pythonGrpcMissing } from '../support/tools.js';
import { caClient, startCaEnv, TD, waitForIndex, type CaClient, type CaEnv } from './support/ca-env.js';
import { newCsr, opensslText, opensslVerifyChain } from './support/pki-fixtures.js';
import { startCaProcess } from './support/ca-process.js';
import { interopCall, writeCaStubs } from './support/python-interop.js';

const skip = stepCaMissing() ?? opensslMissing();
const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;
const scratch = Scratch.forFile('cb-step-ca-');

let step: StepCa;
let env: CaEnv;
let ca: CaServer;
let client: CaClient;
let ztunnel: string;

function stepSigner(overrides: Partial<Extract<SignerConfig, { kind: 'step-ca' }>> = {}): SignerConfig {
  const p = step.provisioners.get('certbroker')!;
  return { kind: 'step-ca', url: step.url, rootFile: step.rootFile, provisioner: p.name, provisionerKeyFile: p.keyFile, timeoutMs: 3000, ...overrides };
}

/**
 * A CA on `signer` served in plaintext (it starts without a serving certificate from step-ca),
 * once its signer has loaded (plaintext starts it in the background; decrypting a PBES2 key takes a while).
 */
async function plaintextCa(signer: SignerConfig): Promise<{ ca: CaServer; client: CaClient }> {
  const c = await env.startCa({ plaintext: true, signer });
  await waitForIndex(c, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  for (let i = 0; i < 1000 && !c.ready; i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(c.ready, 'the CA became ready');
  const cl = caClient(c.port, undefined);
  return { ca: c, client: cl };
}

before(async () => {
  if (skip) return;
  step = await startStepCa(scratch.path('step'), {
    provisioners: [{ name: 'certbroker', maxTlsCertDuration: '48h' }, { name: 'other-identity', template: '{"subject": {}, "uris": ["spiffe://cluster.local/ns/other/sa/other"], "keyUsage": ["digitalSignature"], "extKeyUsage": ["serverAuth", "clientAuth"]}' }],
  });
  env = await startCaEnv();
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'other-b', serviceAccount: 'other', node: 'node-b' });
  // TLS: the CA's own serving certificate comes from step-ca too.
  ca = await env.startCa({ signer: stepSigner() });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'other-b' }) !== undefined);
  client = caClient(ca.port, ca.rootsPem());
  ztunnel = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
});

after(async () => {
  client?.close();
  await env?.close();
  await step?.stop();
});

test('ztunnel impersonating a pod on its node gets a step-ca leaf: X509-SVID for the pod, the CSR key, chain leaf/intermediate/root verified by openssl', { skip }, async () => {
  const csr = await newCsr(SLEEP);
  const res = await client.create({ token: ztunnel, csr, impersonate: SLEEP, ttlSeconds: 7200 });
  assert.ok(res.chain, JSON.stringify(res));
  const chain = res.chain;
  assert.equal(chain.length, 3, 'leaf, step-ca intermediate, root');
  assert.equal(chain[2], ca.rootsPem(), 'the roots are the configured step-ca root');
  assert.equal(new X509Certificate(chain[2]!).fingerprint256, new X509Certificate(step.rootPem).fingerprint256);
  const leaf = new X509Certificate(chain[0]!);
  assert.equal(checkX509Svid(chain[0]!)?.id, SLEEP);
  assert.ok(!leaf.subject, 'empty subject');
  assert.match(leaf.issuer, /CN=Step Intermediate/);
  const validityMs = Date.parse(leaf.validTo) - Date.parse(leaf.validFrom);
  assert.ok(validityMs >= 7200_000 && validityMs <= 7200_000 + 120_000, `validity ${validityMs} ms follows the asked TTL`);
  assert.match(await opensslVerifyChain(chain), /OK/);
  const text = await opensslText(chain[0]!);
  assert.match(text, /X509v3 Subject Alternative Name: critical\s+URI:spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep\s/);
  // A pod's own token, no impersonation, gets its own identity the same way.
  const own = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
  const direct = await client.create({ token: own, csr: await newCsr(SLEEP) });
  assert.ok(direct.chain, JSON.stringify(direct));
  assert.equal(checkX509Svid(direct.chain[0]!)?.id, SLEEP);
});

test('node authorization comes first: impersonating a pod on another node is UNAUTHENTICATED and step-ca is never asked', { skip }, async () => {
  const before = step.signRequests();
  const res = await client.create({ token: ztunnel, csr: await newCsr(`spiffe://${TD}/ns/default/sa/other`), impersonate: `spiffe://${TD}/ns/default/sa/other` });
  assert.equal(res.code, status.UNAUTHENTICATED);
  assert.equal(step.signRequests(), before);
});

test('step-ca refusals become clear statuses: a TTL over its provisioner maximum is PERMISSION_DENIED, a CSR naming another identity too', { skip }, async () => {
  const long = await client.create({ token: ztunnel, csr: await newCsr(SLEEP), impersonate: SLEEP, ttlSeconds: 72 * 3600 });
  assert.equal(long.code, status.PERMISSION_DENIED, JSON.stringify(long));
  assert.equal(long.errorCode, 'ERR_CA_STEP_CA_REFUSED');
  const mismatched = await client.create({ token: ztunnel, csr: await newCsr(`spiffe://${TD}/ns/default/sa/someone-else`), impersonate: SLEEP });
  assert.equal(mismatched.code, status.PERMISSION_DENIED, JSON.stringify(mismatched));
  assert.equal(mismatched.errorCode, 'ERR_CA_STEP_CA_REFUSED');
});

test('a template that issues another identity: the CA checks the leaf and answers INTERNAL, never the leaf', { skip }, async () => {
  const p = step.provisioners.get('other-identity')!;
  const other = await plaintextCa(stepSigner({ provisioner: p.name, provisionerKeyFile: p.keyFile }));
  try {
    const res = await other.client.create({ token: ztunnel, csr: await newCsr(SLEEP), impersonate: SLEEP });
    assert.equal(res.code, status.INTERNAL, JSON.stringify(res));
    assert.equal(res.errorCode, 'ERR_CA_CSR_BAD_CERTIFICATE');
    assert.equal(res.chain, undefined);
  } finally {
    other.client.close();
    await other.ca.stop();
  }
});

test('a wrong provisioner key (same kid, other key) is FAILED_PRECONDITION ERR_CA_STEP_CA_UNAUTHORIZED', { skip }, async () => {
  const right = step.provisioners.get('certbroker')!;
  const wrong = await makeProvisionerKey();
  const keyFile = await scratch.write('wrong.jwk.json', JSON.stringify({ ...wrong.privateJwk, kid: right.kid }));
  const other = await plaintextCa(stepSigner({ provisionerKeyFile: keyFile }));
  try {
    const res = await other.client.create({ token: ztunnel, csr: await newCsr(SLEEP), impersonate: SLEEP });
    assert.equal(res.code, status.FAILED_PRECONDITION, JSON.stringify(res));
    assert.equal(res.errorCode, 'ERR_CA_STEP_CA_UNAUTHORIZED');
  } finally {
    other.client.close();
    await other.ca.stop();
  }
});

test('an encrypted provisioner key (PBES2 JWE) with --provisioner-key-password-file signs', { skip }, async () => {
  const p = step.provisioners.get('certbroker')!;
  const keyFile = await scratch.write('certbroker.jwe', await encryptJwk(p.privateJwk, 'correct horse'));
  const passwordFile = await scratch.write('password.txt', 'correct horse\n');
  const other = await plaintextCa(stepSigner({ provisionerKeyFile: keyFile, provisionerKeyPasswordFile: passwordFile }));
  try {
    const res = await other.client.create({ token: ztunnel, csr: await newCsr(SLEEP), impersonate: SLEEP });
    assert.ok(res.chain, JSON.stringify(res));
    assert.equal(checkX509Svid(res.chain[0]!)?.id, SLEEP);
  } finally {
    other.client.close();
    await other.ca.stop();
  }
});

test('step-ca down: UNAVAILABLE ERR_CA_STEP_CA_UNREACHABLE; back up: the same CA signs again (no restart)', { skip }, async () => {
  await step.stop();
  try {
    const res = await client.create({ token: ztunnel, csr: await newCsr(SLEEP), impersonate: SLEEP });
    assert.equal(res.code, status.UNAVAILABLE, JSON.stringify(res));
    assert.equal(res.errorCode, 'ERR_CA_STEP_CA_UNREACHABLE');
  } finally {
    await step.start();
  }
  const res = await client.create({ token: ztunnel, csr: await newCsr(SLEEP), impersonate: SLEEP });
  assert.ok(res.chain, JSON.stringify(res));
});

for (const kind of ['tcp', 'tls'] as const) {
  test(`step-ca hung (${kind === 'tcp' ? 'accepts, no TLS handshake' : 'TLS handshake, then silence'}): UNAVAILABLE ERR_CA_STEP_CA_TIMEOUT at the deadline, its connection closed`, { skip }, async () => {
    const material = kind === 'tls' ? await silentTlsMaterial() : undefined;
    const hung: HungServer = await startHungServer(material ? { tls: material } : {});
    const rootFile = material ? await scratch.write(`hung-root-${kind}.pem`, material.caCertPem) : step.rootFile;
    const other = await plaintextCa(stepSigner({ url: `https://${hung.address}`, rootFile, timeoutMs: 1000 }));
    try {
      const res = await other.client.create({ token: ztunnel, csr: await newCsr(SLEEP), impersonate: SLEEP });
      assert.equal(res.code, status.UNAVAILABLE, JSON.stringify(res));
      assert.equal(res.errorCode, 'ERR_CA_STEP_CA_TIMEOUT');
      // The signer's start-up /health probe holds one connection; the sign request needs another.
      assert.ok(hung.accepted >= 2, `the request reached the hung server (${hung.accepted} connections)`);
      for (let i = 0; i < 200 && hung.openConnections > 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(hung.openConnections, 0, 'the CA closed the connection it gave up on');
    } finally {
      other.client.close();
      await other.ca.stop();
      await hung.close();
    }
  });
}

test("a caller that gives up (its gRPC deadline) cancels the step-ca request: its connection is closed long before the signer's own deadline", { skip }, async () => {
  const hung: HungServer = await startHungServer();
  const other = await plaintextCa(stepSigner({ url: `https://${hung.address}`, rootFile: step.rootFile, timeoutMs: 120_000 }));
  try {
    // The start-up /health probe holds one connection (until the signer's 120 s deadline).
    for (let i = 0; i < 500 && hung.openConnections < 1; i++) await new Promise((r) => setTimeout(r, 10));
    const held = hung.openConnections;
    const res = await other.client.create({ token: ztunnel, csr: await newCsr(SLEEP), impersonate: SLEEP, deadlineMs: 1500 });
    assert.equal(res.code, status.DEADLINE_EXCEEDED, JSON.stringify(res));
    assert.ok(hung.accepted > held, `the sign request reached the hung server (${hung.accepted} connections)`);
    for (let i = 0; i < 1000 && hung.openConnections > held; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(hung.openConnections, held, 'the sign request was given up with the call, not at the 120 s signer deadline');
  } finally {
    other.client.close();
    await other.ca.stop();
    await hung.close();
  }
});

test('certbroker ca --signer step-ca as a process: flags to a TLS CA whose serving certificate and leaves come from step-ca; the provisioner key never logged; exit 0 on SIGTERM', { skip }, async () => {
  const p = step.provisioners.get('certbroker')!;
  const kubeconfig = await scratch.write('ca.kubeconfig', env.caKubeConfig.exportConfig());
  const args = ['--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', 'off', '--signer', 'step-ca', '--step-ca-url', step.url, '--step-ca-root', step.rootFile, '--provisioner', p.name, '--provisioner-key-file', p.keyFile];
  const proc = await startCaProcess(scratch.dir, args, { CA_SERVING_DNS_NAMES: 'localhost,127.0.0.1', LOG_LEVEL: 'debug', CA_SHUTDOWN_GRACE_SECONDS: '2' });
  const log = proc.log;
  let code: number | null;
  try {
    const listening = await log.waitFor((r) => r.msg === 'CA listening');
    assert.equal(listening.signer, `step-ca:${step.url}`);
    const c = caClient(proc.port, step.rootPem);
    try {
      for (let i = 0; i < 100; i++) {
        const res = await c.create({ token: ztunnel, csr: await newCsr(SLEEP), impersonate: SLEEP });
        if (res.chain) {
          assert.equal(checkX509Svid(res.chain[0]!)?.id, SLEEP);
          assert.match(await opensslVerifyChain(res.chain), /OK/);
          break;
        }
        // The first serving certificate may still be on its way (a retry after a busy step-ca).
        assert.equal(res.code, status.UNAVAILABLE, JSON.stringify(res));
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      c.close();
    }
  } finally {
    code = await proc.stop();
  }
  assert.equal(code, 0, log.lines.join('\n'));
  const text = log.lines.join('\n');
  assert.ok(!text.includes(String(p.privateJwk.d)), 'the provisioner key is not logged');
  assert.doesNotMatch(text, /eyJ[\w-]+\.eyJ[\w-]+\.[\w-]+/, 'no token is logged');
});

const pySkip = skip ?? pythonGrpcMissing();

test('python grpcio through the CA on step-ca: a verified SPIFFE leaf; a refusal is PERMISSION_DENIED', { skip: pySkip }, async () => {
  const stubs = scratch.path('py');
  await mkdir(stubs, { recursive: true });
  await writeCaStubs(stubs);
  const rootsFile = await scratch.write('py-roots.pem', ca.rootsPem());
  const tokenFile = await scratch.write('py-token', ztunnel);
  const py = async (ttlSeconds: number) => {
    const csrFile = await scratch.write('py-csr.pem', await newCsr(SLEEP));
    return interopCall({ stubs, target: `127.0.0.1:${ca.port}`, rootsFile, csrFile, tokenFile, impersonate: SLEEP, ttlSeconds });
  };
  const ok = await py(3600);
  assert.ok(ok.cert_chain, JSON.stringify(ok));
  assert.equal(checkX509Svid(ok.cert_chain[0]!)?.id, SLEEP);
  assert.match(await opensslVerifyChain(ok.cert_chain), /OK/);
  assert.equal((await py(72 * 3600)).code, 'PERMISSION_DENIED');
});
