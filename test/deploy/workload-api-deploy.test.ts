/**
 * deploy/node-broker.yaml serves the SPIFFE Workload API as docs/operations.md describes: the
 * socket named in the SPIFFE_ENDPOINT_SOCKET form, in a hostPath directory of its own that
 * workloads can mount (not the broker's private socket directory), the node's PID namespace for
 * attestation, and no capability added for it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { workloadEndpointPath } from '../../src/broker/index.js';
import { kubectlMissing } from '../support/tools.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { findObject, REPO_ROOT, type K8sObject } from './manifests.js';

interface BrokerPodSpec {
  hostPID?: boolean;
  containers: Array<{
    name: string;
    env?: Array<{ name: string; value?: string }>;
    volumeMounts?: Array<{ name: string; mountPath: string }>;
    securityContext?: { capabilities?: { add?: string[]; drop?: string[] } };
  }>;
  volumes: Array<{ name: string; hostPath?: { path: string; type?: string } }>;
}

test('the node broker serves the Workload API on a hostPath socket directory of its own, with hostPID and no added capability', { skip: kubectlMissing() }, async () => {
  const ds = await findObject('DaemonSet', 'certbroker-node-broker');
  const pod = (ds.spec as { template: { spec: BrokerPodSpec } }).template.spec;
  assert.equal(pod.hostPID, true, 'attestation reads the peer PID in the node PID namespace');
  const broker = pod.containers.find((c) => c.name === 'broker')!;
  const env = new Map((broker.env ?? []).map((e) => [e.name, e.value]));
  const endpoint = env.get('WORKLOAD_API_SOCKET');
  assert.ok(endpoint !== undefined && endpoint.startsWith('unix:///'), `WORKLOAD_API_SOCKET=${endpoint}`);
  const socket = workloadEndpointPath(endpoint)!;
  const dir = socket.slice(0, socket.lastIndexOf('/'));
  const mount = (broker.volumeMounts ?? []).find((m) => m.mountPath.replace(/\/$/, '') === dir);
  assert.ok(mount, `a volume is mounted at ${dir}`);
  const volume = pod.volumes.find((v) => v.name === mount.name);
  assert.equal(volume?.hostPath?.path, dir, 'the same path on the host, for workloads to mount');
  assert.equal(volume?.hostPath?.type, 'DirectoryOrCreate');
  const brokerSocket = workloadEndpointPath(env.get('SPIFFE_BROKER_SOCKET')!)!;
  assert.notEqual(brokerSocket.slice(0, brokerSocket.lastIndexOf('/')), dir, "not the Broker API's private directory");
  assert.deepEqual(broker.securityContext?.capabilities?.add ?? [], []);
  assert.deepEqual(broker.securityContext?.capabilities?.drop, ['ALL']);
});

test('deploy/spiffe-workload: the documented SPIFFE workload mounts the directory the broker serves and names its socket in SPIFFE_ENDPOINT_SOCKET', { skip: kubectlMissing() }, async () => {
  const ds = await findObject('DaemonSet', 'certbroker-node-broker');
  const broker = (ds.spec as { template: { spec: BrokerPodSpec } }).template.spec.containers.find((c) => c.name === 'broker')!;
  const served = workloadEndpointPath((broker.env ?? []).find((e) => e.name === 'WORKLOAD_API_SOCKET')!.value!)!;
  const docs = parseAllDocuments(readFileSync(join(REPO_ROOT, 'deploy/spiffe-workload/spiffe-workload.yaml'), 'utf8')).map((d) => d.toJS() as K8sObject);
  const deployment = docs.find((o) => o.kind === 'Deployment')!;
  const pod = (deployment.spec as { template: { spec: BrokerPodSpec & { serviceAccountName?: string; automountServiceAccountToken?: boolean } } }).template.spec;
  assert.ok(docs.some((o) => o.kind === 'ServiceAccount' && o.metadata.name === pod.serviceAccountName), 'its service account (its identity) is created with it');
  assert.equal(pod.automountServiceAccountToken, false, 'no token needed: attested from the kernel');
  const [app] = pod.containers;
  const endpoint = (app!.env ?? []).find((e) => e.name === 'SPIFFE_ENDPOINT_SOCKET')?.value;
  assert.ok(endpoint?.startsWith('unix:///'), `SPIFFE_ENDPOINT_SOCKET=${endpoint}`);
  const inPod = workloadEndpointPath(endpoint!)!;
  const mount = (app!.volumeMounts ?? []).find((m) => m.mountPath.replace(/\/$/, '') === inPod.slice(0, inPod.lastIndexOf('/')));
  assert.ok(mount, `a volume is mounted where ${inPod} is`);
  assert.equal((mount as { readOnly?: boolean }).readOnly, true);
  const volume = pod.volumes.find((v) => v.name === mount.name);
  assert.equal(volume?.hostPath?.path, served.slice(0, served.lastIndexOf('/')), "the broker's Workload API directory on the host");
  assert.equal(inPod.slice(inPod.lastIndexOf('/')), served.slice(served.lastIndexOf('/')), 'the same socket name');
});
