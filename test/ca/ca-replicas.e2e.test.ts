/**
 * Several `certbroker ca` processes started at once against one devcluster (HTTPS, the CA's
 * RBAC of deploy/rbac-ca.yaml enforced): five self-signed replicas converge on ONE root (one of
 * them creates istio-ca-secret, the others get 409 and adopt it), each answers CreateCertificate
 * with that root last and serves TLS under it, and one Lease holder publishes the trust bundle;
 * three plug-in (cacerts) replicas over the same files answer with the same intermediate and root.
 * Every wait is for a condition, never a duration.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { CA_CERT_KEY } from '../../src/ca/index.js';
import { CA_NAMESPACE, CA_SA, caClient, httpGet, startCaEnv, type CaEnv } from './support/ca-env.js';
import { applyShippedCaRbac } from './support/trust-bundles.js';
import { makePluginCa, newCsr, tempDir, writeCacerts } from './support/pki-fixtures.js';
import { startCaProcess, type CaProcess } from './support/ca-process.js';
import { eventually } from '../broker/support/eventually.js';

const SECRET = 'istio-ca-secret';
const LEASE = 'certbroker-ca-publisher';
let env: CaEnv;
let ztunnelToken: string;

before(async () => {
  env = await startCaEnv();
  await applyShippedCaRbac(env);
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  ztunnelToken = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
});
after(async () => {
  await env?.close();
});

/** `n` CA processes started at once with `args`, as the CA's service account; stopped by the returned function. */
async function startReplicas(dir: string, n: number, args: readonly string[]): Promise<{ procs: CaProcess[]; opsPorts: number[]; stop: () => Promise<void> }> {
  const kubeconfig = join(dir, 'kubeconfig');
  const caToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer], expirationSeconds: 48 * 3600 });
  await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: caToken }), { mode: 0o600 });
  const started = await Promise.allSettled(
    Array.from({ length: n }, (_, i) =>
      startCaProcess(dir, ['--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', '127.0.0.1:0', ...args], {
        POD_NAME: `ca-${i}`,
        CA_NAMESPACE,
        CA_SERVING_DNS_NAMES: 'localhost',
        CA_SIGNING_WORKERS: '0',
        CA_TRUSTED_NODE_ACCOUNTS: 'istio-system/ztunnel',
      }),
    ),
  );
  const procs = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const stop = async () => {
    await Promise.all(procs.map((p) => p.stop()));
  };
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) {
    await stop();
    throw (failed as PromiseRejectedResult).reason;
  }
  const opsPorts = await Promise.all(procs.map(async (p) => Number((await p.log.waitFor((r) => r.msg === 'ops endpoint listening')).port)));
  return { procs, opsPorts, stop };
}

/** The chain `port` answers CreateCertificate with (retried while the replica is not ready yet). */
async function answeredChain(port: number, rootsPem: string): Promise<readonly string[]> {
  const client = caClient(port, rootsPem);
  try {
    const csr = await newCsr();
    return await eventually(`CA on port ${port} answers`, async () => {
      const r = await client.create({ token: ztunnelToken, csr, impersonate: 'spiffe://cluster.local/ns/default/sa/sleep' });
      return r.chain;
    });
  } finally {
    client.close();
  }
}

const derOf = (pem: string) => new X509Certificate(pem).raw;

test('five self-signed replicas started at once converge on one root: one creates istio-ca-secret, the others adopt it; all answer and serve under it', async () => {
  const dir = await tempDir('ca-replicas-');
  let replicas: Awaited<ReturnType<typeof startReplicas>> | undefined;
  try {
    replicas = await startReplicas(dir.path, 5, []);
    const { procs } = replicas;
    const secret = await eventually('istio-ca-secret exists', async () => {
      try {
        return await env.core.readNamespacedSecret({ namespace: CA_NAMESPACE, name: SECRET });
      } catch {
        return undefined;
      }
    });
    const rootPem = Buffer.from(secret.data![CA_CERT_KEY]!, 'base64').toString('utf8');
    for (const [i, p] of procs.entries()) {
      // TLS to the replica is verified against the stored root alone: its serving certificate is under it.
      const chain = await answeredChain(p.port, rootPem);
      assert.ok(derOf(chain.at(-1)!).equals(derOf(rootPem)), `replica ${i} answers with the stored root last`);
    }
    const origins = await Promise.all(
      procs.map(async (p) => (await p.log.waitFor((r) => r.msg === 'created self-signed root' || r.msg === 'another replica created the root first; using it' || r.msg === 'loaded self-signed root')).msg),
    );
    assert.equal(origins.filter((m) => m === 'created self-signed root').length, 1, `exactly one replica stored its root: ${origins.join(', ')}`);
    // The single writer of the trust bundle: one Lease holder among the five.
    const lease = await eventually('a replica holds the publisher Lease', async () => {
      const l = await env.admin.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: CA_NAMESPACE, name: LEASE }).catch(() => undefined);
      return l?.spec?.holderIdentity ? l : undefined;
    });
    const leaders = await Promise.all(replicas.opsPorts.map(async (port) => /^certbroker_leader(\{[^}]*\})? 1$/m.test((await httpGet(port, '/metrics')).body)));
    assert.equal(leaders.filter(Boolean).length, 1, `one leader (${lease.spec!.holderIdentity})`);
  } catch (err) {
    for (const [i, p] of (replicas?.procs ?? []).entries()) process.stderr.write(`--- ca-${i}\n${p.log.lines.slice(-30).join('\n')}\n`);
    throw err;
  } finally {
    await replicas?.stop();
    await dir.remove();
  }
});

test('three plug-in (cacerts) replicas over the same files answer with the same intermediate and root', async () => {
  const dir = await tempDir('ca-replicas-cacerts-');
  let replicas: Awaited<ReturnType<typeof startReplicas>> | undefined;
  try {
    const plugin = await makePluginCa();
    const cacerts = join(dir.path, 'cacerts');
    await mkdir(cacerts);
    await writeCacerts(cacerts, plugin);
    replicas = await startReplicas(dir.path, 3, ['--signer', 'cacerts', '--cacerts-dir', cacerts, '--no-publish-trust-bundle']);
    const chains = [];
    for (const p of replicas.procs) chains.push(await answeredChain(p.port, plugin.root.pem));
    for (const [i, chain] of chains.entries()) {
      assert.equal(chain.length, 3, `replica ${i}: leaf, intermediate, root`);
      assert.ok(derOf(chain[1]!).equals(derOf(plugin.intermediate.pem)), `replica ${i} answers with the plug-in intermediate`);
      assert.ok(derOf(chain[2]!).equals(derOf(plugin.root.pem)), `replica ${i} answers with the plug-in root`);
    }
  } catch (err) {
    for (const [i, p] of (replicas?.procs ?? []).entries()) process.stderr.write(`--- ca-${i}\n${p.log.lines.slice(-30).join('\n')}\n`);
    throw err;
  } finally {
    await replicas?.stop();
    await dir.remove();
  }
});
