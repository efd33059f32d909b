/**
 * SO_PEERCRED through one long-lived core-Perl helper (adapter): each accepted connection's
 * descriptor goes to it over Node's IPC channel as SCM_RIGHTS (`child.send(msg, handle,
 * {keepOpen: true})`; the program is peer-credentials-helper-program.ts), which answers the
 * credentials in ~0.1 ms instead of a process start per batch (~3-10 ms, peer-credentials.ts).
 *
 * The kernel duplicates the descriptor into the helper at the send, so the helper reads the very
 * socket that was accepted (a closed socket is never sent: its handle has no descriptor any more)
 * and needs no privilege over the broker. The broker's own descriptor stays with grpc-js; the
 * helper closes its copy after reading it.
 *
 * Robustness: at most `maxOutstanding` reads wait at once (more fail at once); each read has a
 * deadline, past which it fails and the helper, stuck, is killed; when the helper exits every read
 * it held fails with the reason, and a new one is started once `restartIntervalMs` has passed
 * since the last start (or by the next read after that; `available` says whether a read would be
 * served meanwhile). Helpers that end without answering anything, one after another (perl gone, a
 * seccomp profile killing recvmsg), double the interval each time, up to 64x. Failures are
 * ERR_ATTESTATION_UNAVAILABLE (ERR_PEER_CLOSED for a connection gone before it was read), which the
 * fallback source (peer-credentials-fallback.ts) answers with the Perl-per-batch way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Socket } from 'node:net';
import { systemClock, type Clock } from '../../core/clock.js';
import { BrokerError } from '../errors.js';
import { peerClosed, peerCredentialsUnavailable, type PeerCredentials, type PeerCredentialsSource } from './peer-credentials.js';
import { helperProgram } from './peer-credentials-helper-program.js';
import { socketHandle } from './socket-fd.js';

export interface PeerCredentialsHelperObserver {
  started?(pid: number): void;
  /** The helper ended (or could not start), stop() aside; `reason` names why, `held` the reads that failed with it. */
  exited?(reason: string, held: number): void;
}

export interface PeerCredentialsHelperOptions {
  /** The perl binary. Default `perl`, looked up in /usr/bin:/bin (the child gets an empty environment). */
  readonly perl?: string;
  /** Default `process.arch`. */
  readonly arch?: string;
  /** A read not answered by then fails, and the helper is restarted. Default 2000 ms. */
  readonly timeoutMs?: number;
  /** Reads waiting for the helper at most; a read past it fails at once. Default 1024. */
  readonly maxOutstanding?: number;
  /** Least time between two starts of the helper. Default 1000 ms. */
  readonly restartIntervalMs?: number;
  readonly clock?: Clock;
  readonly observer?: PeerCredentialsHelperObserver;
}

interface Outstanding {
  readonly child: ChildProcess;
  readonly resolve: (creds: PeerCredentials) => void;
  readonly reject: (err: unknown) => void;
  readonly deadline: AbortController;
}

export class PeerCredentialsHelper implements PeerCredentialsSource {
  readonly #perl: string;
  readonly #program: { readonly program: string } | { readonly unsupported: string };
  readonly #timeoutMs: number;
  readonly #maxOutstanding: number;
  readonly #restartIntervalMs: number;
  readonly #clock: Clock;
  readonly #observer: PeerCredentialsHelperObserver | undefined;
  readonly #pending = new Map<number, Outstanding>();
  #child: ChildProcess | undefined;
  #lastStart = -Infinity;
  #starts = 0;
  #nextId = 0;
  #stopped = false;
  #lastExit: string | undefined;
  readonly #stopping = new AbortController();
  /** Helpers in a row that ended without answering one read: each doubles the restart interval (at most 64x). */
  #barren = 0;
  #answered = false;

  constructor(options: PeerCredentialsHelperOptions = {}) {
    this.#perl = options.perl ?? 'perl';
    this.#program = helperProgram(options.arch ?? process.arch);
    this.#timeoutMs = options.timeoutMs ?? 2000;
    this.#maxOutstanding = options.maxOutstanding ?? 1024;
    this.#restartIntervalMs = options.restartIntervalMs ?? 1000;
    this.#clock = options.clock ?? systemClock;
    this.#observer = options.observer;
  }

  /** Why this machine cannot have the helper at all (its architecture), or undefined. */
  get unsupported(): string | undefined {
    return 'unsupported' in this.#program ? this.#program.unsupported : undefined;
  }

  /** The running helper's PID (tests count its descriptors), or undefined. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Helpers started so far. */
  get starts(): number {
    return this.#starts;
  }

  /** Reads waiting for an answer. */
  get outstanding(): number {
    return this.#pending.size;
  }

  /** Whether a read now goes to a helper: one is running, or one may be started. */
  get available(): boolean {
    if (this.#stopped || this.unsupported !== undefined) return false;
    return this.#child !== undefined || this.#clock.now() - this.#lastStart >= this.#interval();
  }

  read(socket: Socket): Promise<PeerCredentials> {
    const handle = socketHandle(socket);
    if (!handle) return Promise.reject(peerClosed());
    if (this.#pending.size >= this.#maxOutstanding) {
      return Promise.reject(peerCredentialsUnavailable(`${this.#pending.size} connections already wait for the SO_PEERCRED helper (at most ${this.#maxOutstanding})`));
    }
    let child: ChildProcess;
    try {
      child = this.#running();
    } catch (err) {
      return Promise.reject(err);
    }
    const id = ++this.#nextId;
    return new Promise<PeerCredentials>((resolve, reject) => {
      const deadline = new AbortController();
      this.#pending.set(id, { child, resolve, reject, deadline });
      this.#clock.sleep(this.#timeoutMs, deadline.signal).then(
        () => {
          if (!this.#settle(id, peerCredentialsUnavailable(`the SO_PEERCRED helper did not answer within ${this.#timeoutMs} ms`))) return;
          // Stuck: what it still holds fails now, and the next read starts another.
          this.#lost(child, `the SO_PEERCRED helper was killed: a read waited ${this.#timeoutMs} ms`);
          child.kill('SIGKILL');
        },
        () => undefined,
      );
      // The handle (a libuv Pipe), not the net.Socket: Node then only reads its descriptor,
      // and does not count the socket as handed to a worker of its server.
      Reflect.apply(child.send, child, [{ id }, handle, { keepOpen: true }, (err: Error | null) => {
        if (err) this.#settle(id, socketHandle(socket) ? peerCredentialsUnavailable(`cannot hand the connection to the SO_PEERCRED helper: ${err.message}`, err) : peerClosed());
      }]);
    });
  }

  /** Stops the helper; reads it held fail. */
  stop(): void {
    this.#stopped = true;
    this.#stopping.abort();
    const child = this.#child;
    if (child) {
      this.#lost(child, 'the broker stopped');
      child.kill('SIGKILL');
    }
  }

  /** Starts the helper now (the broker does at start, so the first connection does not pay for it). */
  launch(): void {
    this.#running();
  }

  #running(): ChildProcess {
    if (this.#child) return this.#child;
    if (this.#stopped) throw peerCredentialsUnavailable('the SO_PEERCRED helper is stopped');
    if ('unsupported' in this.#program) throw peerCredentialsUnavailable(this.#program.unsupported);
    const now = this.#clock.now();
    if (now - this.#lastStart < this.#interval()) throw peerCredentialsUnavailable(`the SO_PEERCRED helper is restarting (it ended: ${this.#lastExit ?? 'unknown'})`);
    this.#lastStart = now;
    this.#starts++;
    this.#answered = false;
    let child: ChildProcess;
    try {
      // In a session of its own: a terminal's Ctrl-C (SIGINT to the foreground process group)
      // drains the broker, and the helper serves that drain until stop() or the channel's EOF.
      child = spawn(this.#perl, ['-e', this.#program.program], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: {}, detached: true });
    } catch (e) {
      const reason = `cannot run ${this.#perl}: ${e instanceof Error ? e.message : String(e)}`;
      this.#lastExit = reason;
      this.#observer?.exited?.(reason, 0);
      throw peerCredentialsUnavailable(reason, e);
    }
    this.#child = child;
    this.#watch(child);
    return child;
  }

  #watch(child: ChildProcess): void {
    // Neither the helper nor its pipes keep the broker's event loop alive.
    child.unref();
    child.channel?.unref();
    let stderr = '';
    if (child.stderr instanceof Socket) child.stderr.unref();
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-500)));
    child.on('spawn', () => child.pid !== undefined && this.#observer?.started?.(child.pid));
    child.on('message', (m: unknown) => this.#answer(child, m));
    child.on('error', (e) => this.#lost(child, `the SO_PEERCRED helper failed: ${e.message}`));
    child.on('exit', (code, signal) => this.#lost(child, `the SO_PEERCRED helper exited with ${code ?? signal}${stderr.trim() ? `: ${stderr.trim()}` : ''}`));
  }

  #answer(child: ChildProcess, m: unknown): void {
    if (typeof m !== 'object' || m === null || !('id' in m) || typeof m.id !== 'number') return;
    const p = this.#pending.get(m.id);
    if (!p || p.child !== child) return;
    if ('pid' in m && 'uid' in m && 'gid' in m && typeof m.pid === 'number' && typeof m.uid === 'number' && typeof m.gid === 'number') {
      this.#answered = true;
      this.#settle(m.id, { pid: m.pid, uid: m.uid, gid: m.gid });
    } else {
      this.#settle(m.id, peerCredentialsUnavailable(`SO_PEERCRED failed: ${'err' in m ? String(m.err) : 'no answer'}`));
    }
  }

  /** Ends read `id` with `outcome`; false when it had ended already. */
  #settle(id: number, outcome: PeerCredentials | BrokerError): boolean {
    const p = this.#pending.get(id);
    if (!p) return false;
    this.#pending.delete(id);
    p.deadline.abort();
    if (outcome instanceof BrokerError) p.reject(outcome);
    else p.resolve(outcome);
    return true;
  }

  /** `child` is gone: every read it held fails with `reason` (once per child). */
  #lost(child: ChildProcess, reason: string): void {
    if (this.#child !== child) return;
    this.#child = undefined;
    this.#lastExit = reason;
    this.#barren = this.#answered ? 0 : this.#barren + 1;
    const held = [...this.#pending].filter(([, p]) => p.child === child).map(([id]) => id);
    for (const id of held) this.#settle(id, peerCredentialsUnavailable(reason));
    // A helper ended by stop() is no failure: not reported (no warning, not counted as an exit).
    if (!this.#stopped) this.#observer?.exited?.(reason, held.length);
    this.#restartLater();
  }

  /** The least time between two starts now: the configured one, doubled for each barren helper in a row. */
  #interval(): number {
    return this.#restartIntervalMs * 2 ** Math.min(Math.max(0, this.#barren - 1), 6);
  }

  /**
   * Starts the next helper once the restart interval has passed (the next connection would
   * otherwise pay for it, or, before that, go to the fallback).
   */
  #restartLater(): void {
    if (this.#stopped) return;
    const wait = Math.max(0, this.#lastStart + this.#interval() - this.#clock.now());
    this.#clock.sleep(wait, this.#stopping.signal).then(
      () => {
        if (this.#child || this.#stopped) return;
        try {
          this.#running();
        } catch {
          // Its reason went to the observer; the next read tries again.
        }
      },
      () => undefined,
    );
  }
}
