/**
 * The peer of an accepted Unix socket connection, from the kernel: SO_PEERCRED, the PID, UID and
 * GID of the process that called connect(), recorded by the kernel at that moment (adapter).
 *
 * Node has no API for it and a native addon needs a compiler, so the broker asks Perl: perl-base is
 * an Essential package of Debian (and Ubuntu), present in every Debian-based image including
 * node:*-slim, and its core `getsockopt` reads SO_PEERCRED with no module at all. The accepted
 * socket's descriptor is handed to a short-lived `perl -e` as an inherited descriptor (the
 * spawn's stdio), which reads the credentials and prints them. Connections accepted while one
 * Perl runs go together in the next one (up to `maxBatch` descriptors per Perl, `maxConcurrent`
 * Perls at a time): one process start, ~3-10 ms here, serves them all.
 *
 * Why not `ss -xp` (iproute2, sock_diag): it lists only the sockets of the broker's own network
 * namespace, and a pod's end of the connection lives in the pod's; and it finds PIDs by reading
 * every process's /proc/<pid>/fd, which costs time proportional to the node's processes and needs
 * CAP_SYS_PTRACE over processes of other users. SO_PEERCRED needs neither, and names the process
 * that connected rather than any process holding the descriptor. Measured: docs/security.md.
 */
import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { BrokerError } from '../errors.js';
import { socketFd } from './socket-fd.js';

export interface PeerCredentials {
  /** 0 when the peer's PID namespace is not an ancestor of the broker's (the broker needs hostPID). */
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

/** Where the broker gets the peer credentials of a connection. */
export interface PeerCredentialsSource {
  read(socket: Socket): Promise<PeerCredentials>;
  /** Sources with a long-lived part start it here (`dir`: where a throwaway probe socket may go). */
  start?(dir: string): Promise<unknown>;
  stop?(): void;
}

/** SOL_SOCKET and SO_PEERCRED per Node architecture (asm-generic: 1 and 17; powerpc: 21; mips: 0xffff and 18). */
const SOCKOPT: Readonly<Record<string, readonly [number, number]>> = {
  x64: [1, 17],
  arm64: [1, 17],
  arm: [1, 17],
  ia32: [1, 17],
  riscv64: [1, 17],
  s390x: [1, 17],
  s390: [1, 17],
  loong64: [1, 17],
  ppc64: [1, 21],
  ppc: [1, 21],
  mips: [0xffff, 18],
  mipsel: [0xffff, 18],
};

/**
 * The Perl program: for each descriptor number in @ARGV, one line `pid uid gid` (struct ucred:
 * int, unsigned, unsigned) or `- <error>`. Core Perl only (no `use`), so it starts in ~2 ms.
 */
function perlProgram(arch: string): string {
  const opt = SOCKOPT[arch];
  if (!opt) throw new BrokerError('ERR_ATTESTATION_UNAVAILABLE', `SO_PEERCRED is not known for architecture ${arch}`, { status: 'unavailable' });
  const [level, name] = opt;
  return [
    'for my $fd (@ARGV) {',
    '  my $h; my $c;',
    `  if (open($h, "+<&=", $fd)) { $c = getsockopt($h, ${level}, ${name}); }`,
    '  print((defined($c) && length($c) >= 12) ? join(" ", unpack("i I I", $c)) : "- $!", "\\n");',
    '}',
  ].join('\n');
}

export interface PerlPeerCredentialsOptions {
  /** The perl binary. Default `perl`, looked up in /usr/bin:/bin (the child gets an empty environment). */
  readonly perl?: string;
  /** Descriptors per Perl run. Default 64. */
  readonly maxBatch?: number;
  /** Perl runs at a time. Default 2. */
  readonly maxConcurrent?: number;
  /** A Perl run that takes longer is killed and its connections fail. Default 5000 ms. */
  readonly timeoutMs?: number;
  /** Default `process.arch`. */
  readonly arch?: string;
}

interface Pending {
  readonly socket: Socket;
  readonly fd: number;
  readonly resolve: (creds: PeerCredentials) => void;
  readonly reject: (err: unknown) => void;
}

export function peerCredentialsUnavailable(detail: string, cause?: unknown): BrokerError {
  return new BrokerError('ERR_ATTESTATION_UNAVAILABLE', `peer credentials unavailable: ${detail}`, {
    status: 'unavailable',
    publicMessage: 'caller attestation is unavailable',
    ...(cause === undefined ? {} : { cause }),
  });
}

/** The connection closed before its peer credentials were read: nothing is left to attest. */
export function peerClosed(): BrokerError {
  return new BrokerError('ERR_PEER_CLOSED', 'the connection closed before it was attested', {
    status: 'unavailable',
    publicMessage: 'caller attestation is unavailable',
  });
}

export class PerlPeerCredentials implements PeerCredentialsSource {
  readonly #perl: string;
  readonly #program: string;
  readonly #maxBatch: number;
  readonly #maxConcurrent: number;
  readonly #timeoutMs: number;
  readonly #queue: Pending[] = [];
  #running = 0;
  #scheduled = false;
  #runs = 0;

  constructor(options: PerlPeerCredentialsOptions = {}) {
    this.#perl = options.perl ?? 'perl';
    this.#program = perlProgram(options.arch ?? process.arch);
    this.#maxBatch = options.maxBatch ?? 64;
    this.#maxConcurrent = options.maxConcurrent ?? 2;
    this.#timeoutMs = options.timeoutMs ?? 5000;
  }

  /** Perl processes started so far (a batch is one). */
  get runs(): number {
    return this.#runs;
  }

  read(socket: Socket): Promise<PeerCredentials> {
    return new Promise((resolve, reject) => {
      const fd = socketFd(socket);
      if (fd === undefined) {
        reject(peerClosed());
        return;
      }
      this.#queue.push({ socket, fd, resolve, reject });
      this.#kick();
    });
  }

  /** Starts the next batch on the next turn of the event loop, so connections accepted together share it. */
  #kick(): void {
    if (this.#scheduled || this.#running >= this.#maxConcurrent || this.#queue.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      while (this.#running < this.#maxConcurrent && this.#queue.length > 0) this.#run(this.#queue.splice(0, this.#maxBatch));
    });
  }

  #run(taken: Pending[]): void {
    // The descriptor numbers must still be these sockets' when the child is forked: checked and
    // spawned in one synchronous step (a closed socket's number could already name another).
    const batch = taken.filter((p) => {
      if (socketFd(p.socket) === p.fd) return true;
      p.reject(peerClosed());
      return false;
    });
    if (batch.length === 0) return;
    this.#running++;
    this.#runs++;
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const done = (outcome: { lines: string[] } | { error: BrokerError }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      this.#running--;
      batch.forEach((p, i) => {
        if ('error' in outcome) return p.reject(outcome.error);
        const creds = parseCredentials(outcome.lines[i]);
        if (creds) p.resolve(creds);
        else p.reject(peerCredentialsUnavailable(`SO_PEERCRED failed: ${outcome.lines[i] ?? 'no answer'}`));
      });
      this.#kick();
    };
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(this.#perl, ['-e', this.#program, ...batch.map((_, i) => String(3 + i))], {
        stdio: ['ignore', 'pipe', 'pipe', ...batch.map((p) => p.fd)],
        env: {},
      });
    } catch (e) {
      done({ error: peerCredentialsUnavailable(`cannot run ${this.#perl}: ${e instanceof Error ? e.message : String(e)}`, e) });
      return;
    }
    timer = setTimeout(() => {
      child.kill('SIGKILL');
      done({ error: peerCredentialsUnavailable(`perl did not answer within ${this.#timeoutMs} ms`) });
    }, this.#timeoutMs);
    timer.unref();
    let out = '';
    let err = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d.slice(0, 1000)));
    child.on('error', (e) => done({ error: peerCredentialsUnavailable(`cannot run ${this.#perl}: ${e.message}`, e) }));
    child.on('close', (code, signal) => {
      if (code === 0) done({ lines: out.split('\n') });
      else done({ error: peerCredentialsUnavailable(`${this.#perl} exited with ${code ?? signal}: ${err.trim()}`) });
    });
  }
}

function parseCredentials(line: string | undefined): PeerCredentials | undefined {
  const m = line === undefined ? null : /^(-?\d+) (\d+) (\d+)$/.exec(line);
  if (!m) return undefined;
  return { pid: Number(m[1]), uid: Number(m[2]), gid: Number(m[3]) };
}
