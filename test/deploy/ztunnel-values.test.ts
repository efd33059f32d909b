/**
 * deploy/ztunnel/values-certbroker.yaml (Helm values for Istio's ztunnel chart) against the
 * rendered deploy/: ztunnel's `caAddress` is the node-local Service of the broker's Istio CA
 * front, that Service keeps traffic on the node and reaches the broker container's front port,
 * the broker listens there on the pod's addresses, `ALT_CA_HOSTNAME` is a name the front's
 * certificate carries and the CA grants by default, and ztunnel's root ConfigMap is the one the
 * broker trusts. A rename on either side fails here.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { DEFAULT_GRANTABLE_SERVING_NAMES } from '../../src/ca/index.js';
import { ISTIO_CA_FRONT_DEFAULTS } from '../../src/broker/index.js';
import { findObject, REPO_ROOT } from './manifests.js';
import { kubectlMissing } from '../support/tools.js';

interface Values {
  readonly caAddress: string;
  readonly env: Record<string, string>;
  readonly trustBundleName: string;
}

interface Container {
  readonly name: string;
  readonly env?: Array<{ name: string; value?: string }>;
  readonly ports?: Array<{ name?: string; containerPort: number }>;
  readonly volumeMounts?: Array<{ name: string; mountPath: string }>;
}

test('the ztunnel chart values point at the node-local front the rendered deploy/ serves', { skip: kubectlMissing() }, async () => {
  const values = parse(readFileSync(join(REPO_ROOT, 'deploy/ztunnel/values-certbroker.yaml'), 'utf8')) as Values;
  const service = (await findObject('Service', 'certbroker-istio-ca-front')) as unknown as {
    metadata: { name: string; namespace: string };
    spec: { selector: Record<string, string>; internalTrafficPolicy?: string; ports: Array<{ port: number; targetPort: string | number }> };
  };
  const ds = (await findObject('DaemonSet', 'certbroker-node-broker')) as unknown as {
    spec: { template: { metadata: { labels: Record<string, string> }; spec: { containers: Container[]; volumes: Array<{ name: string; configMap?: { name: string } }> } } };
  };

  const m = /^([a-z0-9-]+)\.([a-z0-9-]+)\.svc:(\d+)$/.exec(values.caAddress);
  assert.ok(m, `caAddress ${values.caAddress} is <service>.<namespace>.svc:<port>`);
  assert.equal(m[1], service.metadata.name);
  assert.equal(m[2], service.metadata.namespace);
  assert.equal(service.spec.internalTrafficPolicy, 'Local', 'a connection never leaves the node');
  const port = service.spec.ports.find((p) => p.port === Number(m[3]));
  assert.ok(port, `the Service exposes ${m[3]}`);

  const labels = ds.spec.template.metadata.labels;
  for (const [k, v] of Object.entries(service.spec.selector)) assert.equal(labels[k], v, `the Service selects the broker pods (${k})`);
  const broker = ds.spec.template.spec.containers.find((c) => c.name === 'broker')!;
  const containerPort = broker.ports?.find((p) => p.name === port.targetPort || p.containerPort === port.targetPort);
  assert.ok(containerPort, `the broker container has port ${String(port.targetPort)}`);
  const env = new Map((broker.env ?? []).map((e) => [e.name, e.value]));
  const listen = env.get('ISTIO_CA_FRONT_ADDRESS');
  assert.equal(listen, `0.0.0.0:${containerPort.containerPort}`, 'the front listens on the pod addresses at that port (loopback is not reachable from ztunnel)');

  const alt = values.env.ALT_CA_HOSTNAME;
  assert.ok(ISTIO_CA_FRONT_DEFAULTS.servingNames.includes(alt!), `ALT_CA_HOSTNAME=${alt} is on the front's certificate`);
  assert.ok(DEFAULT_GRANTABLE_SERVING_NAMES.includes(alt!), `and the CA grants it by default`);

  const rootMount = broker.volumeMounts?.find((v) => v.mountPath === '/var/run/secrets/istio');
  const rootVolume = ds.spec.template.spec.volumes.find((v) => v.name === rootMount?.name);
  assert.equal(values.trustBundleName, rootVolume?.configMap?.name, 'ztunnel trusts the ConfigMap the broker takes its mesh root from');
});
