/**
 * Pods as a real cluster holds them (~2.9 KB of JSON each: labels, annotations, two containers
 * with env, ports, a probe and resources, volumes, status with conditions and container
 * statuses), generated deterministically for the pod-index tests and benchmark.
 */
export interface ClusterShape {
  readonly pods: number;
  readonly nodes: number;
  readonly namespaces: number;
  /** Service accounts per namespace. */
  readonly accounts: number;
}

const PHASES = ['Running', 'Running', 'Running', 'Running', 'Running', 'Running', 'Pending', 'Succeeded', 'Failed'];

function hex(n: number, len: number): string {
  return (n >>> 0).toString(16).padStart(8, '0').repeat(Math.ceil(len / 8)).slice(0, len);
}

/** A UUID made from `i` (unique per i). */
export function podUid(i: number): string {
  const h = hex(Math.imul(i, 2654435761), 8);
  return `${h}-${hex(i, 4)}-4${hex(i >>> 4, 3)}-a${hex(Math.imul(i, 40503), 3)}-${hex(i, 4)}${hex(Math.imul(i, 97), 8)}`;
}

/** The node (index) pod `i` runs on: spread by a multiplicative hash, so the replicas of one service account land on different nodes as a scheduler spreads them. */
export function podNode(i: number, nodes: number): number {
  return (Math.imul(i ^ 0x5bd1e995, 2654435761) >>> 0) % nodes;
}

export function nodeName(n: number): string {
  return `ip-10-${(n >> 8) & 255}-${n & 255}-${(n * 7) % 250}.eu-west-1.compute.internal`;
}

/** Pod `i` of a cluster of this shape. */
export function realisticPod(i: number, shape: ClusterShape): Record<string, unknown> {
  const nsIndex = i % shape.namespaces;
  const ns = `team-${nsIndex}-prod`;
  const app = `svc-${(i >> 3) % 997}`;
  const sa = `${app.slice(0, 4)}-sa-${i % shape.accounts}`;
  const hash = hex(Math.imul(i >> 3, 2246822519), 10);
  const name = `${app}-${hash}-${hex(Math.imul(i, 3266489917), 5)}`;
  const node = nodeName(podNode(i, shape.nodes));
  const phase = PHASES[i % PHASES.length]!;
  const image = `registry.example.com/${ns}/${app}:v1.${i % 40}.${i % 7}`;
  const started = '2026-11-30T08:15:27Z';
  return {
    metadata: {
      name,
      generateName: `${app}-${hash}-`,
      namespace: ns,
      uid: podUid(i),
      resourceVersion: String(100000 + i),
      creationTimestamp: started,
      labels: { app, 'app.kubernetes.io/name': app, 'app.kubernetes.io/part-of': `team-${nsIndex}`, 'pod-template-hash': hash, version: `v1.${i % 40}`, 'security.istio.io/tlsMode': 'istio' },
      annotations: {
        'prometheus.io/scrape': 'true',
        'prometheus.io/port': '9090',
        'ambient.istio.io/redirection': 'enabled',
      },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `${app}-${hash}`, uid: podUid(i >> 3 | 0x4000000), controller: true, blockOwnerDeletion: true }],
    },
    spec: {
      serviceAccountName: sa,
      serviceAccount: sa,
      nodeName: node,
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      schedulerName: 'default-scheduler',
      securityContext: { runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001 },
      containers: [
        {
          name: 'app',
          image,
          imagePullPolicy: 'IfNotPresent',
          ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }, { name: 'metrics', containerPort: 9090, protocol: 'TCP' }],
          env: [{ name: 'APP_ENV', value: 'production' }, { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } }],
          resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '1', memory: '512Mi' } },
          readinessProbe: { httpGet: { path: '/ready', port: 8080 }, periodSeconds: 10 },
          volumeMounts: [{ name: 'config', mountPath: '/etc/app' }, { name: 'kube-api-access', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true }],
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
        },
        {
          name: 'log-shipper',
          image: 'registry.example.com/platform/log-shipper:2.4.1',
          resources: { requests: { cpu: '20m', memory: '32Mi' }, limits: { memory: '64Mi' } },
        },
      ],
      volumes: [
        { name: 'config', configMap: { name: `${app}-config`, defaultMode: 420 } },
        { name: 'kube-api-access', projected: { defaultMode: 420, sources: [{ serviceAccountToken: { expirationSeconds: 3607, path: 'token' } }, { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } }] } },
      ],
      tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
    },
    status: {
      phase,
      hostIP: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      podIP: `100.${(i >> 16) & 63}.${(i >> 8) & 255}.${i & 255}`,
      startTime: started,
      qosClass: 'Burstable',
      conditions: ['Ready', 'PodScheduled'].map((type) => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: started })),
      containerStatuses: [
        { name: 'app', ready: true, restartCount: i % 3, image, containerID: `containerd://${hex(Math.imul(i, 31), 64)}`, started: true, state: { running: { startedAt: started } } },
      ],
    },
  };
}
