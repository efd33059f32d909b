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
import { findObject } from './manifests.js';

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
