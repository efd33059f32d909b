/**
 * attestation — who is calling, from the kernel: the peer PID of a Unix socket connection
 * (SO_PEERCRED), the process's start time and cgroups from /proc, the pod kubelet placed it in.
 * Used by the broker's fronts that serve callers without credentials (the Workload API).
 *
 * - `podOfCgroupFile`, `podOfCgroupPath`, `cgroupAnchors` (pure): kubelet's cgroup layouts -> pod UID.
 * - `parseProcStat`, `parseUptimeTicks` (pure): start time and the boot clock, for PID reuse checks.
 * - `ProcessAttestor` (pure over a `ProcReader`): attest a PID, re-check it before each message.
 * - `procfsReader`, `ownCgroup` (adapters): the real /proc.
 * - `PerlPeerCredentials` (adapter): SO_PEERCRED through core Perl, batched.
 * - `ConnectionAttestor`: an accepted socket -> its caller's pod.
 */
export {
  podOfCgroupFile,
  podOfCgroupPath,
  parseCgroupFile,
  cgroupAnchors,
  hierarchyKey,
  type CgroupAnchors,
  type CgroupDriver,
  type CgroupLine,
  type CgroupPodResult,
  type ContainerRuntime,
  type PathMatch,
  type PodCgroup,
  type QosClass,
} from './cgroup-pod.js';
export { parseProcStat, parseUptimeTicks, isExited, CLOCK_TICKS_PER_SECOND, type ProcStat } from './proc-stat.js';
export { ProcessAttestor, type Attestation, type AttestationFailure, type AttestedProcess, type ProcReader } from './process-attestor.js';
export { procfsReader, ownCgroup } from './procfs-reader.js';
export { PerlPeerCredentials, type PeerCredentials, type PeerCredentialsSource, type PerlPeerCredentialsOptions } from './peer-credentials.js';
export { socketFd } from './socket-fd.js';
export { verifyPeerCredentials } from './peer-credentials-check.js';
export {
  ConnectionAttestor,
  type AttestationOutcome,
  type ConnectionAttestation,
  type ConnectionAttestorObserver,
  type ConnectionAttestorOptions,
} from './connection-attestor.js';
