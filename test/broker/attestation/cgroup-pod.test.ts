/**
 * kubelet's cgroup layouts -> pod UID (src/broker/attestation/cgroup-pod.ts). The paths are the
 * shapes real nodes show in /proc/<pid>/cgroup: cgroup v2 and v1, systemd and cgroupfs drivers,
 * containerd, CRI-O and docker, the three QoS classes, kind's --cgroup-root, a node that is itself
 * a container, the relative paths of a cgroup namespace; and look-alikes that must not count.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cgroupAnchors, podOfCgroupFile, podOfCgroupPath, parseCgroupFile } from '../../../src/broker/attestation/index.js';

const UID = '2c48913c-b29f-11e7-9350-020968147796';
const UID_ = UID.replaceAll('-', '_');
const OTHER = 'daa5c7ee-3484-4533-af39-3591564fd03e';
const CID = '9bca8d63d5fa610783847915bcff0ecac1273e5b4bed3f6fa1b07350e0135961';
const CID2 = 'aff34703e5e1f89443e9a1bffcc80f43f74d4808a2dd22c8f88c08547b323934';

const pods: Array<[string, string, Record<string, string | undefined>]> = [
  [
    'systemd, burstable, containerd (cgroup v2)',
    `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID_}.slice/cri-containerd-${CID}.scope`,
    { qos: 'burstable', driver: 'systemd', containerId: CID, runtime: 'containerd' },
  ],
  [
    'systemd, besteffort, CRI-O',
    `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID_}.slice/crio-${CID}.scope`,
    { qos: 'besteffort', driver: 'systemd', containerId: CID, runtime: 'cri-o' },
  ],
  [
    'systemd, guaranteed (directly under kubepods.slice), docker',
    `/kubepods.slice/kubepods-pod${UID_}.slice/docker-${CID}.scope`,
    { qos: 'guaranteed', driver: 'systemd', containerId: CID, runtime: 'docker' },
  ],
  [
    "systemd, CRI-O's conmon: the pod, no container",
    `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID_}.slice/crio-conmon-${CID}.scope`,
    { qos: 'burstable', driver: 'systemd', containerId: undefined, runtime: undefined },
  ],
  [
    'systemd, a nested cgroup inside the container (e.g. systemd in the container)',
    `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID_}.slice/cri-containerd-${CID}.scope/init.scope`,
    { qos: 'burstable', driver: 'systemd', containerId: CID, runtime: 'containerd' },
  ],
  [
    "kind: kubelet --cgroup-root=/kubelet with the systemd driver",
    `/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod${UID_}.slice/cri-containerd-${CID}.scope`,
    { qos: 'besteffort', driver: 'systemd', containerId: CID, runtime: 'containerd' },
  ],
  ['cgroupfs, burstable, containerd/docker', `/kubepods/burstable/pod${UID}/${CID}`, { qos: 'burstable', driver: 'cgroupfs', containerId: CID, runtime: undefined }],
  ['cgroupfs, besteffort', `/kubepods/besteffort/pod${UID}/${CID}`, { qos: 'besteffort', driver: 'cgroupfs', containerId: CID }],
  ['cgroupfs, guaranteed', `/kubepods/pod${UID}/${CID}`, { qos: 'guaranteed', driver: 'cgroupfs', containerId: CID }],
  ['cgroupfs, CRI-O', `/kubepods/burstable/pod${UID}/crio-${CID}`, { qos: 'burstable', driver: 'cgroupfs', containerId: CID, runtime: 'cri-o' }],
  ['the pod cgroup itself (no container segment)', `/kubepods/besteffort/pod${UID}`, { qos: 'besteffort', driver: 'cgroupfs', containerId: undefined }],
  [
    'cgroup namespace: relative to the broker, climbing to kubepods.slice',
    `/../../../kubepods-besteffort.slice/kubepods-besteffort-pod${UID_}.slice/cri-containerd-${CID}.scope`,
    { driver: 'systemd', containerId: CID },
  ],
  [
    'cgroup namespace: a sibling pod of the same QoS class',
    `/../../kubepods-burstable-pod${UID_}.slice/cri-containerd-${CID}.scope`,
    { driver: 'systemd', containerId: CID },
  ],
  ['cgroup namespace: climbing to the root', `/../../../../kubepods.slice/kubepods-pod${UID_}.slice/cri-containerd-${CID}.scope`, { qos: 'guaranteed' }],
  ['cgroup namespace, cgroupfs', `/../../besteffort/pod${UID}/${CID}`, { driver: 'cgroupfs', containerId: CID }],
];

for (const [name, path, expected] of pods) {
  test(`pod: ${name}`, () => {
    const m = podOfCgroupPath(path);
    assert.equal(m.kind, 'pod', path);
    assert.ok(m.kind === 'pod');
    assert.equal(m.pod.podUid, UID, 'the UID as the API server writes it (_ -> -)');
    for (const [k, v] of Object.entries(expected)) assert.equal(m.pod[k as keyof typeof m.pod], v, `${k} of ${path}`);
  });
}

const notPods: Array<[string, string, 'none' | 'unanchored']> = [
  ['the root', '/', 'none'],
  ['a host service', '/system.slice/containerd.service', 'none'],
  ['a login session', '/user.slice/user-1000.slice/session-3.scope', 'none'],
  ['the kubepods tree above any pod', '/kubepods.slice/kubepods-burstable.slice', 'none'],
  ['a plain docker container', `/system.slice/docker-${CID}.scope`, 'none'],
  ['a UID that is not a lower-case UUID', `/kubepods/burstable/pod${UID.toUpperCase()}/${CID}`, 'none'],
  ['a truncated UID', `/kubepods/burstable/pod${UID.slice(0, 30)}/${CID}`, 'none'],
  ['systemd form with dashes in the UID (not a slice name systemd makes)', `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID}.slice`, 'none'],
  [
    "a user's delegated subtree naming a pod slice",
    `/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods-besteffort-pod${UID_}.slice/cri-containerd-${CID}.scope`,
    'unanchored',
  ],
  [
    'a delegated subtree rebuilding the whole kubepods chain under it',
    `/user.slice/user-1000.slice/user@1000.service/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID_}.slice/x.scope`,
    'unanchored',
  ],
  ['cgroupfs look-alike outside kubepods', `/tenant/besteffort/pod${UID}/${CID}`, 'unanchored'],
  ['cgroupfs pod under the wrong QoS parent', `/kubepods/besteffort/extra/pod${UID}/${CID}`, 'unanchored'],
  ['systemd pod slice under the wrong QoS slice', `/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod${UID_}.slice`, 'unanchored'],
  ['systemd pod slice at the root (chain missing)', `/kubepods-besteffort-pod${UID_}.slice/cri-containerd-${CID}.scope`, 'unanchored'],
  ['cgroup namespace: climbing to a user slice', `/../../../user.slice/kubepods-besteffort-pod${UID_}.slice/x.scope`, 'unanchored'],
  ['not absolute', `kubepods/besteffort/pod${UID}/${CID}`, 'none'],
];

for (const [name, path, kind] of notPods) {
  test(`no pod: ${name}`, () => {
    assert.equal(podOfCgroupPath(path).kind, kind, path);
  });
}

test('a node that is itself a container: pods sit under the node root the broker learns from its own cgroup', () => {
  const nodeRoot = `/docker/${CID2}`;
  const pod = `${nodeRoot}/kubepods/besteffort/pod${UID}/${CID}`;
  assert.equal(podOfCgroupPath(pod).kind, 'unanchored', 'without the anchor a prefixed tree is not trusted');
  const own = `12:pids:${nodeRoot}/kubepods/burstable/pod${OTHER}/${CID2}\n0::/\n`;
  const anchors = cgroupAnchors(own);
  assert.deepEqual(anchors.get('12:pids'), ['docker', CID2]);
  assert.equal(anchors.has('0:'), false, 'a hierarchy where the broker is in no pod has no anchor: the root');
  const m = podOfCgroupFile(`12:pids:${pod}\n`, anchors);
  assert.equal(m.kind, 'pod');
  assert.ok(m.kind === 'pod' && m.pod.podUid === UID);
  assert.equal(podOfCgroupFile(`12:pids:/kubepods/besteffort/pod${UID}/${CID}\n`, anchors).kind, 'unanchored', 'the anchor is required once known');
});

test('cgroupAnchors: a broker pod on an ordinary node anchors at the root; in a cgroup namespace it has none', () => {
  const own = `0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${OTHER.replaceAll('-', '_')}.slice/cri-containerd-${CID2}.scope\n`;
  assert.deepEqual(cgroupAnchors(own).get('0:'), []);
  assert.equal(cgroupAnchors('0::/\n').size, 0);
  assert.equal(cgroupAnchors('0::/system.slice/certbroker.service\n').size, 0);
});

test('parseCgroupFile: v1, v2 and hybrid lines; controllers with commas and name=; malformed lines skipped', () => {
  const lines = parseCgroupFile('12:cpu,cpuacct:/a\n1:name=systemd:/b\n0::/c\ngarbage\n3:x:relative\n\n');
  assert.deepEqual(lines, [
    { hierarchy: '12', controllers: 'cpu,cpuacct', path: '/a' },
    { hierarchy: '1', controllers: 'name=systemd', path: '/b' },
    { hierarchy: '0', controllers: '', path: '/c' },
  ]);
});

const V2 = `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID_}.slice/cri-containerd-${CID}.scope`;
const V1 = `/kubepods/besteffort/pod${UID}/${CID}`;

test('whole files: pure v2 (only the 0:: line), pure v1, hybrid', () => {
  const v2 = podOfCgroupFile(`0::${V2}\n`);
  assert.ok(v2.kind === 'pod' && v2.pod.podUid === UID && v2.pod.containerId === CID);
  const v1 = ['12:pids', '11:memory', '10:cpu,cpuacct', '9:devices', '1:name=systemd'].map((h) => `${h}:${V1}`).join('\n');
  const r1 = podOfCgroupFile(`${v1}\n`);
  assert.ok(r1.kind === 'pod' && r1.pod.podUid === UID && r1.pod.driver === 'cgroupfs');
  // Hybrid with the cgroupfs driver: kubelet manages the v1 controllers; the unified line is elsewhere.
  const hybrid = podOfCgroupFile(`${v1}\n0::/system.slice/containerd.service\n`);
  assert.ok(hybrid.kind === 'pod' && hybrid.pod.podUid === UID);
  // Hybrid with the systemd driver: the same pod everywhere.
  const systemdV1 = `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID_}.slice/cri-containerd-${CID}.scope`;
  const both = podOfCgroupFile(`4:memory:${systemdV1}\n1:name=systemd:${systemdV1}\n0::${V2}\n`);
  assert.ok(both.kind === 'pod' && both.pod.driver === 'systemd');
});

test('whole files: lines naming different pods or containers trust nothing; look-alikes are reported', () => {
  const conflict = podOfCgroupFile(`12:pids:/kubepods/besteffort/pod${OTHER}/${CID}\n0::${V2}\n`);
  assert.equal(conflict.kind, 'conflict');
  const containers = podOfCgroupFile(`12:pids:/kubepods/besteffort/pod${UID}/${CID2}\n0::${V2}\n`);
  assert.equal(containers.kind, 'conflict');
  const podLevel = podOfCgroupFile(`12:pids:/kubepods/besteffort/pod${UID}\n0::${V2}\n`);
  assert.ok(podLevel.kind === 'pod' && podLevel.pod.containerId === CID, 'a pod-level line and a container line of that pod agree');
  assert.deepEqual(podOfCgroupFile('0::/\n'), { kind: 'none' });
  assert.deepEqual(podOfCgroupFile(`0::/user.slice/kubepods-besteffort-pod${UID_}.slice/x.scope\n`), { kind: 'unanchored', podUid: UID });
  assert.deepEqual(podOfCgroupFile(''), { kind: 'none' });
});
