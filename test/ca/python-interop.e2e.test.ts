/**
 * Interop with an independent gRPC implementation: Python grpcio (Debian's python3-grpcio)
 * with stubs generated from proto/istio/v1/auth/ca.proto at test time, over TLS trusting the
 * mesh root, against the real CA and devcluster. Skipped, with the reason, where Python's grpcio or
 * grpc_tools (or openssl) is not installed.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CaServer } from '../../src/ca/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { startCaEnv, TD, waitForIndex, type CaEnv } from './support/ca-env.js';
import { makePluginCa, newCsr, opensslVerifyChain, tempDir, writeCacerts, type PluginCa } from './support/pki-fixtures.js';
import { opensslMissing, pythonGrpcMissing } from '../support/tools.js';
import { interopCall, writeCaStubs } from './support/python-interop.js';

const skip = pythonGrpcMissing();

let env: CaEnv;
let ca: CaServer;
let h2ca: CaServer;
let engineCa: CaServer;
let work: { path: string; remove: () => Promise<void> };
let plugin: PluginCa;

before(async () => {
  if (skip) return;
  work = await tempDir('ca-py-');
  await writeCaStubs(work.path);
  env = await startCaEnv();
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  // A plug-in CA (root -> intermediate) so the chain has every kind of element.
  plugin = await makePluginCa('Interop');
  const { mkdir } = await import('node:fs/promises');
  await mkdir(join(work.path, 'cacerts'));
  await writeCacerts(join(work.path, 'cacerts'), plugin);
  ca = await env.startCa({ signer: { kind: 'cacerts', dir: join(work.path, 'cacerts') } });
  h2ca = await env.startCa({ signer: { kind: 'cacerts', dir: join(work.path, 'cacerts') }, transport: 'http2' });
  engineCa = await env.startCa({ signer: { kind: 'cacerts', dir: join(work.path, 'cacerts') }, transport: 'h2' });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  await writeFile(join(work.path, 'roots.pem'), ca.rootsPem());
});

after(async () => {
  await env?.close();
  await work?.remove();
});

async function py(args: { token: string; impersonate?: string; ttl?: number; port?: number }): Promise<{ cert_chain?: string[]; code?: string; details?: string }> {
  await writeFile(join(work.path, 'csr.pem'), await newCsr());
  await writeFile(join(work.path, 'token'), args.token);
  return interopCall({
    stubs: work.path,
    target: `127.0.0.1:${args.port ?? ca.port}`,
    rootsFile: join(work.path, 'roots.pem'),
    csrFile: join(work.path, 'csr.pem'),
    tokenFile: join(work.path, 'token'),
    ...(args.impersonate !== undefined ? { impersonate: args.impersonate } : {}),
    ttlSeconds: args.ttl ?? 0,
  });
}

for (const transport of ['grpc-js', 'http2', 'h2'] as const) {
test(`python grpcio gets a certificate over TLS (${transport} transport); chain is leaf, intermediate, root bundle last`, { skip: skip ?? opensslMissing() }, async () => {
  const port = transport === 'http2' ? h2ca.port : transport === 'h2' ? engineCa.port : ca.port;
  const token = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
  const res = await py({ token, impersonate: `spiffe://${TD}/ns/default/sa/sleep`, ttl: 7200, port });
  assert.ok(res.cert_chain, JSON.stringify(res));
  const chain = res.cert_chain;
  assert.equal(chain.length, 3);
  assert.equal(chain[1], plugin.intermediate.pem, 'then the intermediate');
  assert.equal(new X509Certificate(chain[1]!).ca, true);
  const leaf = new X509Certificate(chain[0]!);
  assert.equal(leaf.ca, false, 'first element is the leaf');
  assert.equal(checkX509Svid(chain[0]!)?.id, `spiffe://${TD}/ns/default/sa/sleep`);
  assert.equal(Date.parse(leaf.validTo) - Date.parse(leaf.validFrom), 7200_000 + 120_000);
  const last = new X509Certificate(chain[chain.length - 1]!);
  assert.equal(last.ca, true, 'last element is the root');
  assert.equal(chain[chain.length - 1], ca.rootsPem());
  assert.ok(leaf.checkIssued(new X509Certificate(chain[1]!)));
  assert.ok(new X509Certificate(chain[1]!).checkIssued(last));
  assert.match(await opensslVerifyChain(chain), /OK/);
});
}

test('python grpcio sees UNAUTHENTICATED for a bad token and INVALID_ARGUMENT for TTL over max', { skip }, async () => {
  const bad = await py({ token: 'not-a-token' });
  assert.deepEqual(bad, { code: 'UNAUTHENTICATED', details: 'authentication failed' });
  const token = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
  const long = await py({ token, ttl: 365 * 86_400 });
  assert.equal(long.code, 'INVALID_ARGUMENT');
});
