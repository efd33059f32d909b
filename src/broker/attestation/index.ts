/**
 * attestation — who is calling, from the kernel: the peer PID of a Unix socket connection
 * (SO_PEERCRED), the process's start time and cgroups from /proc, the pod kubelet placed it in.
 * Used by the broker's fronts that serve callers without credentials (the Workload API).
 *
 * - `podOfCgroupFile`, `podOfCgroupPath`, `cgroupAnchors` (pure): kubelet's cgroup layouts -> pod UID.
 * - `parseProcStat`, `parseUptimeTicks` (pure): start time and the boot clock, for PID reuse checks.
 * - `ProcessAttestor` (pure over a `ProcReader`): attest a PID, re-check it before each message.
 * - `procfsReader`, `ownCgroup` (adapters): the real /proc.
 * - `PeerCredentialsHelper` (adapter): SO_PEERCRED through one long-lived core Perl that receives
 *   each connection's descriptor over Node's IPC channel (SCM_RIGHTS); `PerlPeerCredentials`
 *   (adapter): a Perl start per batch of connections, the fallback; `PeerCredentialsWithFallback`
 *   picks between them at start and per read.
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
export { nodeProcessAttestor, procfsReader, ownCgroup } from './procfs-reader.js';
export {
  PerlPeerCredentials,
  peerClosed,
  peerCredentialsUnavailable,
  type PeerCredentials,
  type PeerCredentialsSource,
  type PerlPeerCredentialsOptions,
} from './peer-credentials.js';
export { PeerCredentialsHelper, type PeerCredentialsHelperObserver, type PeerCredentialsHelperOptions } from './peer-credentials-helper.js';
export { helperProgram } from './peer-credentials-helper-program.js';
export { PeerCredentialsWithFallback, type PeerCredentialsFallbackObserver, type PeerCredentialsFallbackOptions, type PeerCredentialsMode } from './peer-credentials-fallback.js';
export { socketFd, socketHandle } from './socket-fd.js';
export { verifyPeerCredentials } from './peer-credentials-check.js';
export {
  ConnectionAttestor,
  type AttestationOutcome,
  type ConnectionAttestation,
  type ConnectionAttestorObserver,
  type ConnectionAttestorOptions,
} from './connection-attestor.js';
