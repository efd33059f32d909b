/**
 * The package as an integrator gets it: `npm pack` of this repository, unpacked into a fresh
 * project's node_modules/certbroker (its dependencies linked from ours: no registry), and a
 * TypeScript program there that imports `certbroker` by name — the example signer and CA
 * program of docs/ca.md ("Writing a signer"), taken from the doc as written, plus a node broker
 * started with `readBrokerConfig`/`startBroker`. Compiled with `tsc --strict` against the
 * package's own declarations, then run against the devcluster: the CA issues with the custom
 * signer's chain, and the broker serves a workload SVID under that root over the Broker API.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { BrokerClient, brokerRbacObjects, firstMessage, IstioCaClient, splitDerCertificates, workloadCertPem } from '../../src/broker/index.js';
import { startDevCluster, type DevCluster } from '../../src/devcluster/index.js';
import { eventually } from '../broker/support/eventually.js';
import { kubeConfigFor, tokenFor } from '../broker/support/stack.js';
import { REPO_ROOT } from '../support/fixtures.js';
import { Scratch } from '../support/scratch.js';

const run = promisify(execFile);
const TD = 'cluster.local';
const NODE = 'node-1';
const BROKER_NS = 'istio-system';
const BROKER_SA = 'certbroker-node';
const CONSUMER_SA = 'ztunnel';

/** The fenced ts block that follows `<!-- name …-->` in docs/ca.md. */
function docBlock(name: string): string {
  const doc = readFileSync(join(REPO_ROOT, 'docs/ca.md'), 'utf8');
  const m = new RegExp(`<!-- ${name.replace('.', '\\.')}[^>]*-->\\n\`\`\`ts\\n([\\s\\S]*?)\\n\`\`\`\\n`, 'u').exec(doc);
  assert.ok(m?.[1], `docs/ca.md has no \`\`\`ts block after <!-- ${name} -->`);
  return `${m[1]}\n`;
}

/** A node broker process as an integrator writes it (not in the docs: the CLI's `certbroker broker` does the same). */
const NODE_BROKER = `import { createLogger, readBrokerConfig, startBroker, type Broker } from 'certbroker';

const broker: Broker = await startBroker(await readBrokerConfig({ env: process.env, logger: createLogger({ level: 'warn' }) }));
await broker.whenReady(AbortSignal.timeout(60_000));
process.stdout.write(\`\${JSON.stringify({ ready: broker.ready, identity: broker.ownIdentity, socket: broker.brokerSocketPath })}\\n\`);
process.once('SIGTERM', () => void broker.stop(2000).then(() => process.exit(0)));
`;

/** The error model and the Signer types are real types, not \`any\`: misuse does not compile. */
const TYPES_CHECK = `import { CaError, CertbrokerError, isCertbrokerError, loadSignerModule, SignerRefusal, type CaErrorCode, type ErrorStatus, type Signer, type SignerModule, type SignerModuleRequest, type SignerModuleResult } from 'certbroker';
import { ExampleSigner } from './example-signer.js';

const code: CaErrorCode = 'ERR_CA_SIGNER_NOT_READY';
const status: ErrorStatus = 'unavailable';
const err: CertbrokerError = new CaError(code, 'not ready', { status });
export const checks = [isCertbrokerError(err), err.code] as const;
export const asSigner: (s: ExampleSigner) => Signer = (s) => s;
// @ts-expect-error not a CA error code
export const badCode: CaErrorCode = 'ERR_NOT_A_CODE';
// @ts-expect-error a Signer must sign
export const notASigner: Signer = { description: 'x', ready: true, notReadyReason: undefined, roots: () => [] };
// A signer module's default export (docs/ca.md, "Signer modules"): typed request, PEM/DER result, SignerRefusal.
export const signerModule: SignerModule = {
  roots: () => [new Uint8Array([0x30])],
  async sign(r: SignerModuleRequest): Promise<SignerModuleResult> {
    if (r.purpose === 'workload' && r.spiffeId?.endsWith('/sa/admin')) throw new SignerRefusal('no admin certificates here');
    r.signal.throwIfAborted();
    return { leaf: new Uint8Array(r.spkiDer.length), roots: [r.publicKey.export({ type: 'spki', format: 'pem' }).toString()] };
  },
};
export const loader: (specifier: string) => Promise<SignerModule> = loadSignerModule;
// @ts-expect-error a signer module must return roots
export const noRoots: SignerModule = { sign: signerModule.sign };
`;

interface Started {
  readonly child: ChildProcess;
  readonly first: Record<string, unknown>;
  readonly stderr: string[];
}

/** Runs `script` and resolves with the JSON of its first stdout line (its "started" report). */
function startProcess(script: string, env: NodeJS.ProcessEnv): Promise<Started> {
  const child = spawn(process.execPath, [script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const stderr: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (l) => stderr.push(l));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not report within 60 s: ${stderr.join('\n')}`)), 60_000);
    createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      resolve({ child, first: JSON.parse(line) as Record<string, unknown>, stderr });
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${String(code ?? signal)}) before reporting: ${stderr.join('\n')}`));
    });
  });
}

/** SIGTERM, and the exit code once it has gone. */
function stopProcess(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

let scratch: Scratch;
let app: string;
let packedFiles: string[];
let dc: DevCluster;
const children: ChildProcess[] = [];

before(async () => {
  scratch = Scratch.create('public-api-');
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', scratch.dir], { cwd: REPO_ROOT, env: { ...process.env, npm_config_loglevel: 'error' } });
  const [packed] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  packedFiles = packed!.files.map((f) => f.path);
  app = scratch.path('app');
  const installed = join(app, 'node_modules', 'certbroker');
  mkdirSync(installed, { recursive: true });
  await run('tar', ['-xzf', join(scratch.dir, packed!.filename), '-C', installed, '--strip-components=1']);
  // The package's dependencies (and @types/node for the app) from ours: no registry involved.
  for (const name of readdirSync(join(REPO_ROOT, 'node_modules'))) {
    if (name.startsWith('.')) continue;
    symlinkSync(join(REPO_ROOT, 'node_modules', name), join(app, 'node_modules', name));
  }
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'certbroker-integrator', private: true, type: 'module' }));
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, types: ['node'], skipLibCheck: true, outDir: 'dist', rootDir: 'src' },
      include: ['src'],
    }),
  );
  mkdirSync(join(app, 'src'));
  writeFileSync(join(app, 'src', 'example-signer.ts'), docBlock('example-signer.ts'));
  writeFileSync(join(app, 'src', 'example-ca.ts'), docBlock('example-ca.ts'));
  writeFileSync(join(app, 'src', 'node-broker.ts'), NODE_BROKER);
  writeFileSync(join(app, 'src', 'types-check.ts'), TYPES_CHECK);
  dc = await startDevCluster({ simulateKubelet: true });
});

after(async () => {
  for (const c of children) await stopProcess(c);
  await dc?.close();
  await scratch?.remove();
});

test('the packed package holds the entry, its declarations and the protos, and no tests', () => {
  for (const f of ['dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/ca/signer.d.ts', 'dist/src/pki/leaf-worker.js', 'dist/proto/istio/v1/auth/ca.proto', 'dist/proto/spiffe/broker/broker.proto']) {
    assert.ok(packedFiles.includes(f), `${f} missing from the package`);
  }
  assert.deepEqual(packedFiles.filter((f) => /^(?:dist\/)?(?:test|bench|src)\//u.test(f) && !f.startsWith('dist/src/')), []);
});

test('a strict TypeScript project compiles against the package: the docs example signer, its CA program, a broker', async () => {
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  await run(process.execPath, [tsc, '-p', app]).catch((err: { stdout?: string; stderr?: string }) => {
    assert.fail(`tsc failed in the integrator project:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  });
});

test("the example CA issues with the custom signer's chain; the broker serves a workload SVID under its root", async () => {
  const admin = kubeConfigFor(dc, dc.adminToken);
  const core = admin.makeApiClient(CoreV1Api);
  await dc.apply([
    ...[BROKER_NS, 'shop'].map((name) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } })),
    ...[[BROKER_NS, BROKER_SA], [BROKER_NS, CONSUMER_SA], ['shop', 'cart']].map(([namespace, name]) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace, name } })),
    ...brokerRbacObjects({ namespace: BROKER_NS, serviceAccount: BROKER_SA }),
  ]);
  const pod = (namespace: string, name: string, serviceAccountName: string) =>
    core.createNamespacedPod({ namespace, body: { metadata: { name, namespace }, spec: { nodeName: NODE, serviceAccountName, containers: [{ name: 'c', image: 'x' }] } } });
  const brokerPod = await pod(BROKER_NS, 'certbroker-node-abcde', BROKER_SA);
  await pod('shop', 'cart-0', 'cart');

  const caKubeconfig = scratch.path('ca.kubeconfig');
  await dc.writeKubeconfig(caKubeconfig);
  const ca = await startProcess(join(app, 'dist', 'example-ca.js'), {
    ...process.env,
    KUBECONFIG: caKubeconfig,
    CA_GRPC_ADDRESS: '127.0.0.1:0',
    CA_OPS_ADDRESS: 'off',
    CA_SERVING_DNS_NAMES: 'localhost',
    CA_TRUSTED_NODE_ACCOUNTS: `${BROKER_NS}/${BROKER_SA}`,
    CA_SIGNING_WORKERS: '1',
  });
  children.push(ca.child);
  const port = ca.first.port as number;
  const rootsPem = ca.first.rootsPem as string;
  const root = new X509Certificate(rootsPem);
  assert.equal(root.subject, `O=${TD} example root`);

  // A workload's own certificate straight from the CA: leaf <- example issuing CA <- example root.
  const consumerToken = await tokenFor(core, BROKER_NS, CONSUMER_SA, { audience: 'istio-ca', expirationSeconds: 3600 });
  const caClient = new IstioCaClient({
    address: `127.0.0.1:${port}`,
    caRootsPem: rootsPem,
    tlsServerName: 'localhost',
    tokens: { token: async () => consumerToken },
    clusterId: 'Kubernetes',
    certTtlSeconds: 3600,
    impersonate: false,
  });
  let consumer: ReturnType<typeof workloadCertPem>;
  try {
    const cert = await caClient.fetchCertificate(`spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}`, AbortSignal.timeout(20_000));
    const [leaf, issuing] = cert.chainDer.map((d) => new X509Certificate(d));
    assert.match(issuing!.subject, /^CN=example issuing CA \d+$/u);
    assert.ok(leaf!.verify(issuing!.publicKey), 'the leaf is signed by the example issuing CA');
    assert.ok(issuing!.verify(root.publicKey), 'the issuing CA is signed by the example root');
    consumer = workloadCertPem(cert);
  } finally {
    caClient.close();
  }

  // The node broker, configured from its environment as in a DaemonSet.
  const rootFile = scratch.path('root-cert.pem');
  writeFileSync(rootFile, rootsPem);
  const brokerKubeconfig = scratch.path('broker.kubeconfig');
  await dc.writeKubeconfig(brokerKubeconfig, { token: (await tokenFor(core, BROKER_NS, BROKER_SA, { audience: dc.issuer, expirationSeconds: 3600 })).reveal(), name: BROKER_SA });
  const socket = scratch.path('broker.sock');
  const broker = await startProcess(join(app, 'dist', 'node-broker.js'), {
    ...process.env,
    KUBECONFIG: brokerKubeconfig,
    NODE_NAME: NODE,
    POD_NAME: brokerPod.metadata!.name!,
    POD_NAMESPACE: BROKER_NS,
    POD_UID: brokerPod.metadata!.uid!,
    SERVICE_ACCOUNT: BROKER_SA,
    CA_ADDRESS: `127.0.0.1:${port}`,
    CA_ROOT_CERT_FILE: rootFile,
    CA_TLS_SERVER_NAME: 'localhost',
    SPIFFE_BROKER_SOCKET: `unix://${socket}`,
    CNI_EVENT_SOCKET: scratch.path('pluginevent.sock'),
    BROKER_ALLOWED_CALLERS: `spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}`,
    BROKER_OPS_ADDRESS: 'off',
    ISTIO_CA_FRONT_ADDRESS: 'off',
    BROKER_UPDATE_JITTER_MS: '0',
  });
  children.push(broker.child);
  assert.deepEqual(broker.first, { ready: true, identity: `spiffe://${TD}/ns/${BROKER_NS}/sa/${BROKER_SA}`, socket });

  const client = new BrokerClient({ socketPath: socket, rootsPem, certChainPem: consumer.certChainPem, privateKeyPem: consumer.privateKeyPem, trustDomain: TD });
  try {
    const msg = await eventually('cart SVID from the broker', async () => {
      const stream = client.subscribeX509Svid({ namespace: 'shop', name: 'cart-0' });
      try {
        return await firstMessage(stream);
      } catch {
        return undefined;
      } finally {
        stream.cancel();
      }
    });
    const svid = msg.svids[0]!;
    assert.equal(svid.spiffe_id, `spiffe://${TD}/ns/shop/sa/cart`);
    const chain = splitDerCertificates(svid.x509_svid).map((d) => new X509Certificate(d));
    assert.match(chain[1]!.subject, /^CN=example issuing CA \d+$/u);
    assert.deepEqual(splitDerCertificates(svid.bundle).map((d) => new X509Certificate(d).fingerprint256), [root.fingerprint256]);
  } finally {
    client.close();
  }

  assert.equal(await stopProcess(broker.child), 0, `broker exit; stderr:\n${broker.stderr.join('\n')}`);
  assert.equal(await stopProcess(ca.child), 0, `CA exit; stderr:\n${ca.stderr.join('\n')}`);
});
