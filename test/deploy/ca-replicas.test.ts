/**
 * deploy/ runs the CA as replicas the node brokers spread over (docs/operations.md, CA replicas):
 * a Deployment of 3 spread over nodes and zones by pod anti-affinity on its own pod labels, a
 * PodDisruptionBudget over the same pods that keeps all but one up, a headless Service (one DNS
 * address per ready pod) that the node broker's CA_ADDRESS names and the CA's serving names
 * cover, and the ClusterIP Service kept for one-address clients. Rendered by real kubectl.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCaTarget } from '../../src/grpc/index.js';
import { kubectlMissing } from '../support/tools.js';
import { findObject } from './manifests.js';

interface Term {
  readonly topologyKey: string;
  readonly labelSelector: { readonly matchLabels: Record<string, string> };
}
interface CaPodSpec {
  readonly affinity?: { readonly podAntiAffinity?: { readonly preferredDuringSchedulingIgnoredDuringExecution?: readonly { readonly weight: number; readonly podAffinityTerm: Term }[] } };
  readonly containers: readonly { readonly name: string; readonly env?: readonly { readonly name: string; readonly value?: string }[]; readonly ports?: readonly { readonly name: string; readonly containerPort: number }[] }[];
}
interface ServiceSpec {
  readonly clusterIP?: string;
  readonly selector: Record<string, string>;
  readonly ports: readonly { readonly name: string; readonly port: number; readonly targetPort: number }[];
}

const skip = kubectlMissing();
const envOf = (c: CaPodSpec['containers'][number]) => new Map((c.env ?? []).map((e) => [e.name, e.value]));
const selects = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);

test('the CA: 3 replicas, anti-affinity on its own pods by node and zone, a PDB that keeps all but one', { skip }, async () => {
  const dep = await findObject('Deployment', 'certbroker-ca');
  const spec = dep.spec as { replicas: number; selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string> }; spec: CaPodSpec } };
  const podLabels = spec.template.metadata.labels;
  assert.equal(spec.replicas, 3);
  const terms = spec.template.spec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? [];
  const keys = terms.filter((t) => selects(t.podAffinityTerm.labelSelector.matchLabels, podLabels)).map((t) => t.podAffinityTerm.topologyKey);
  assert.deepEqual(keys.sort(), ['kubernetes.io/hostname', 'topology.kubernetes.io/zone'], 'replicas repel each other per node and per zone');

  const pdb = await findObject('PodDisruptionBudget', 'certbroker-ca');
  const pdbSpec = pdb.spec as { maxUnavailable?: number; minAvailable?: number; selector: { matchLabels: Record<string, string> } };
  assert.ok(selects(pdbSpec.selector.matchLabels, podLabels), 'the PDB selects the CA pods');
  assert.deepEqual(pdbSpec.selector.matchLabels, spec.selector.matchLabels);
  const allowedDown = pdbSpec.maxUnavailable ?? spec.replicas - (pdbSpec.minAvailable ?? spec.replicas);
  assert.equal(allowedDown, 1, 'a drain takes one replica at a time');
});

test('the headless Service reaches every CA pod, the broker names it, the CA serving certificate covers it; the ClusterIP Service stays', { skip }, async () => {
  const dep = await findObject('Deployment', 'certbroker-ca');
  const tpl = (dep.spec as { template: { metadata: { labels: Record<string, string> }; spec: CaPodSpec } }).template;
  const ca = tpl.spec.containers.find((c) => c.name === 'ca')!;
  const grpcPort = ca.ports!.find((p) => p.name === 'grpc-ca')!.containerPort;

  const headless = (await findObject('Service', 'certbroker-ca-headless')).spec as ServiceSpec;
  assert.equal(headless.clusterIP, 'None');
  assert.ok(selects(headless.selector, tpl.metadata.labels));
  assert.deepEqual(headless.ports.map((p) => [p.port, p.targetPort]), [[15012, grpcPort]]);

  const vip = (await findObject('Service', 'certbroker-ca')).spec as ServiceSpec;
  assert.notEqual(vip.clusterIP, 'None', 'one address for ztunnel/istiod-style clients');
  assert.ok(selects(vip.selector, tpl.metadata.labels));

  const ds = await findObject('DaemonSet', 'certbroker-node-broker');
  const broker = (ds.spec as { template: { spec: CaPodSpec } }).template.spec.containers.find((c) => c.name === 'broker')!;
  const address = envOf(broker).get('CA_ADDRESS')!;
  const target = parseCaTarget(address);
  assert.ok(!('problem' in target), address);
  assert.equal(target.kind, 'dns');
  assert.equal(target.endpoints[0]!.host, 'certbroker-ca-headless.istio-system.svc');
  assert.equal(target.endpoints[0]!.port, 15012);
  const serving = (envOf(ca).get('CA_SERVING_DNS_NAMES') ?? '').split(',');
  const verified = envOf(broker).get('CA_TLS_SERVER_NAME') ?? target.endpoints[0]!.host;
  assert.ok(serving.includes(verified), `the name the broker verifies (${verified}) is in the CA's serving certificate (${serving.join(', ')})`);
  assert.ok(serving.includes('certbroker-ca.istio-system.svc'), 'and the ClusterIP name too');
});
