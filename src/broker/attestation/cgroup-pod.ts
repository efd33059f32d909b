/**
 * Which pod a process belongs to, read from its `/proc/<pid>/cgroup` as kubelet lays cgroups out.
 * Pure: text in, facts out.
 *
 * kubelet puts every pod in a cgroup of its own under the `kubepods` tree, per QoS class, with one
 * child cgroup per container (created by the runtime):
 *
 * | driver | pod cgroup | container cgroup |
 * |---|---|---|
 * | systemd | `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid, - as _>.slice` (Guaranteed: `/kubepods.slice/kubepods-pod<uid>.slice`) | `cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope` (CRI-O's monitor: `crio-conmon-<id>.scope`) |
 * | cgroupfs | `/kubepods/besteffort/pod<uid>` (Guaranteed: `/kubepods/pod<uid>`) | `<id>` (containerd, docker), `crio-<id>` |
 *
 * The file has one line per hierarchy, `hierarchy-ID:controllers:path`: on cgroup v2 only `0::<path>`,
 * on v1 one line per controller (`4:memory:<path>`, `1:name=systemd:<path>`), on hybrid hosts both.
 * A line that names a pod must name it *where kubelet puts pods*: the pod's cgroup must hang from
 * the `kubepods` chain starting at the hierarchy's root (or at the node's cgroup root, the
 * `anchor`, which the broker learns from its own cgroup: e.g. `/docker/<id>` when the node itself
 * is a container). Anywhere else a cgroup named `pod<uid>` proves nothing: a user with a delegated
 * cgroup subtree (systemd `user@.service`, rootless runtimes) can create one under any name. In
 * a cgroup namespace (the broker's own container, cgroup v2) other processes' paths are relative,
 * `/../../kubepods-besteffort.slice/…`: the part after the `..` steps must then be a tail of that
 * chain, which holds only when the common ancestor is inside the kubepods tree (the broker is a
 * pod, so a process outside the tree climbs to a root that is not `kubepods`).
 */

export type QosClass = 'guaranteed' | 'burstable' | 'besteffort';
export type CgroupDriver = 'systemd' | 'cgroupfs';
export type ContainerRuntime = 'containerd' | 'cri-o' | 'docker';

/** A process's pod, as its cgroup names it. */
export interface PodCgroup {
  /** The pod's UID as the API server writes it (lower-case UUID with `-`). */
  readonly podUid: string;
  readonly qos: QosClass;
  readonly driver: CgroupDriver;
  /** The container's ID, when the process is in a container cgroup the parser knows. */
  readonly containerId?: string;
  /** The runtime when the container cgroup's name tells it. */
  readonly runtime?: ContainerRuntime;
}

/** One line of `/proc/<pid>/cgroup`. */
export interface CgroupLine {
  readonly hierarchy: string;
  /** `''` on cgroup v2, `memory`, `cpu,cpuacct`, `name=systemd`, … on v1. */
  readonly controllers: string;
  readonly path: string;
}

/** The result for one path: a pod where kubelet puts pods; a pod-like name somewhere else; nothing. */
export type PathMatch = { readonly kind: 'pod'; readonly pod: PodCgroup } | { readonly kind: 'unanchored'; readonly podUid: string } | { readonly kind: 'none' };

/** What a whole cgroup file says. */
export type CgroupPodResult =
  | { readonly kind: 'pod'; readonly pod: PodCgroup }
  /** No line names a pod (a host process, or a container that is not a pod). */
  | { readonly kind: 'none' }
  /** A line names a pod outside the kubepods tree (a delegated subtree, a look-alike name). */
  | { readonly kind: 'unanchored'; readonly podUid: string }
  /** Lines name different pods or containers: nothing is trusted. */
  | { readonly kind: 'conflict'; readonly detail: string };

/** The node's cgroup root per hierarchy (`hierarchyKey`): the segments above `kubepods`. */
export type CgroupAnchors = ReadonlyMap<string, readonly string[]>;

const HEX = '[0-9a-f]';
const UID_UNDERSCORE = `${HEX}{8}_${HEX}{4}_${HEX}{4}_${HEX}{4}_${HEX}{12}`;
const UID_DASH = `${HEX}{8}-${HEX}{4}-${HEX}{4}-${HEX}{4}-${HEX}{12}`;
/** `[<root>-]kubepods[-<qos>]-pod<uid>.slice` (kubelet's `--cgroup-root` shows as a prefix: `kubelet-kubepods-…`). */
const SYSTEMD_POD = new RegExp(`^((?:[a-z0-9_]+-)*kubepods)(?:-(burstable|besteffort))?-pod(${UID_UNDERSCORE})\\.slice$`);
const CGROUPFS_POD = new RegExp(`^pod(${UID_DASH})$`);
const SYSTEMD_CONTAINER = new RegExp(`^(cri-containerd|crio|docker)-(${HEX}{64})\\.scope$`);
const CGROUPFS_CONTAINER = new RegExp(`^(crio-)?(${HEX}{64})$`);
const RUNTIME_OF_PREFIX: Readonly<Record<string, ContainerRuntime>> = { 'cri-containerd': 'containerd', crio: 'cri-o', docker: 'docker' };

/** The key a hierarchy's anchor is stored under: `0:` (v2), `4:memory`, `1:name=systemd`. */
export function hierarchyKey(line: Pick<CgroupLine, 'hierarchy' | 'controllers'>): string {
  return `${line.hierarchy}:${line.controllers}`;
}

/** The lines of a `/proc/<pid>/cgroup` file; malformed lines are skipped. */
export function parseCgroupFile(content: string): CgroupLine[] {
  const lines: CgroupLine[] = [];
  for (const raw of content.split('\n')) {
    if (raw === '') continue;
    const first = raw.indexOf(':');
    const second = first < 0 ? -1 : raw.indexOf(':', first + 1);
    if (second < 0) continue;
    const path = raw.slice(second + 1);
    if (!path.startsWith('/')) continue;
    lines.push({ hierarchy: raw.slice(0, first), controllers: raw.slice(first + 1, second), path });
  }
  return lines;
}

/** A pod segment: its UID, QoS, driver and the ancestor segments kubelet puts above it. */
interface PodSegment {
  readonly podUid: string;
  readonly qos: QosClass;
  readonly driver: CgroupDriver;
  /** The segments from the kubepods root down to the pod's parent. */
  readonly chain: readonly string[];
}

/** systemd slice names spell their ancestry: `a-b-c.slice` lives in `a-b.slice`, in `a.slice`. */
function sliceAncestors(unit: string): string[] {
  const parts = unit.slice(0, -'.slice'.length).split('-');
  return parts.slice(0, -1).map((_, i) => `${parts.slice(0, i + 1).join('-')}.slice`);
}

function podSegment(segments: readonly string[], i: number): PodSegment | undefined {
  const seg = segments[i]!;
  const sd = SYSTEMD_POD.exec(seg);
  if (sd) {
    const qos: QosClass = sd[2] === 'burstable' ? 'burstable' : sd[2] === 'besteffort' ? 'besteffort' : 'guaranteed';
    return { podUid: sd[3]!.replaceAll('_', '-'), qos, driver: 'systemd', chain: sliceAncestors(seg) };
  }
  const fs = CGROUPFS_POD.exec(seg);
  if (fs) {
    const parent = segments[i - 1];
    const qos: QosClass = parent === 'burstable' || parent === 'besteffort' ? parent : 'guaranteed';
    return { podUid: fs[1]!, qos, driver: 'cgroupfs', chain: qos === 'guaranteed' ? ['kubepods'] : ['kubepods', qos] };
  }
  return undefined;
}

function containerOf(driver: CgroupDriver, seg: string | undefined): { containerId: string; runtime?: ContainerRuntime } | undefined {
  if (seg === undefined) return undefined;
  if (driver === 'systemd') {
    const m = SYSTEMD_CONTAINER.exec(seg);
    return m ? { containerId: m[2]!, runtime: RUNTIME_OF_PREFIX[m[1]!]! } : undefined;
  }
  const m = CGROUPFS_CONTAINER.exec(seg);
  if (!m) return undefined;
  return m[1] ? { containerId: m[2]!, runtime: 'cri-o' } : { containerId: m[2]! };
}

function sameSegments(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((s, i) => s === b[i]);
}

/**
 * The pod one cgroup path names. `anchor`: the node's cgroup root for this hierarchy (default the
 * root itself). An absolute path must be `anchor` + the kubepods chain + the pod; a path relative
 * to a cgroup namespace (leading `..`) must continue with a tail of that.
 */
export function podOfCgroupPath(path: string, anchor: readonly string[] = []): PathMatch {
  if (!path.startsWith('/')) return { kind: 'none' };
  const all = path.split('/').filter((s) => s !== '');
  let climbs = 0;
  while (all[climbs] === '..') climbs++;
  const rest = all.slice(climbs);
  for (let i = 0; i < rest.length; i++) {
    const pod = podSegment(rest, i);
    if (!pod) continue;
    const above = rest.slice(0, i);
    const expected = [...anchor, ...pod.chain];
    const anchored = climbs === 0 ? sameSegments(above, expected) : above.length <= expected.length && sameSegments(above, expected.slice(expected.length - above.length));
    if (!anchored || above.includes('..')) return { kind: 'unanchored', podUid: pod.podUid };
    const container = containerOf(pod.driver, rest[i + 1]);
    return { kind: 'pod', pod: { podUid: pod.podUid, qos: pod.qos, driver: pod.driver, ...(container ?? {}) } };
  }
  return { kind: 'none' };
}

/**
 * The pod a whole cgroup file names. Lines that name no pod are ignored (on hybrid hosts some
 * hierarchies are not managed by kubelet); every line that names one must name the same pod and
 * the same container, or nothing is trusted.
 */
export function podOfCgroupFile(content: string, anchors: CgroupAnchors = new Map()): CgroupPodResult {
  let found: PodCgroup | undefined;
  let unanchored: string | undefined;
  for (const line of parseCgroupFile(content)) {
    const match = podOfCgroupPath(line.path, anchors.get(hierarchyKey(line)) ?? []);
    if (match.kind === 'unanchored') unanchored ??= match.podUid;
    if (match.kind !== 'pod') continue;
    const pod = match.pod;
    if (!found) {
      found = pod;
      continue;
    }
    if (pod.podUid !== found.podUid) return { kind: 'conflict', detail: `cgroups name pods ${found.podUid} and ${pod.podUid}` };
    if (pod.containerId !== undefined && found.containerId !== undefined && pod.containerId !== found.containerId) {
      return { kind: 'conflict', detail: `cgroups name containers ${found.containerId} and ${pod.containerId}` };
    }
    if (found.containerId === undefined && pod.containerId !== undefined) found = pod;
  }
  if (found) return { kind: 'pod', pod: found };
  return unanchored !== undefined ? { kind: 'unanchored', podUid: unanchored } : { kind: 'none' };
}

/**
 * The node's cgroup root per hierarchy, learned from the broker's own cgroup file: when the broker
 * runs in a pod, whatever sits above its kubepods chain (`[]` on an ordinary node, `['docker', '<id>']`
 * when the node is itself a container). Hierarchies where the broker is in no pod (cgroup
 * namespace: `/`; a process outside kubelet) have no entry: the root.
 */
export function cgroupAnchors(ownContent: string): CgroupAnchors {
  const anchors = new Map<string, readonly string[]>();
  for (const line of parseCgroupFile(ownContent)) {
    const segments = line.path.split('/').filter((s) => s !== '');
    if (segments.includes('..')) continue;
    for (let i = 0; i < segments.length; i++) {
      const pod = podSegment(segments, i);
      if (!pod) continue;
      const start = i - pod.chain.length;
      if (start >= 0 && sameSegments(segments.slice(start, i), pod.chain)) anchors.set(hierarchyKey(line), segments.slice(0, start));
      break;
    }
  }
  return anchors;
}
