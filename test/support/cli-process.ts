/**
 * The `certbroker` CLI (dist/src/cli/main.js) as a child process, for tests that signal it and
 * wait for it to end: its stderr lines (JSON log records parsed), and `exit(boundMs)`, which
 * resolves with the exit code and signal, or with `undefined` if the process is still running
 * after `boundMs` (it is then killed). The bound is a guard, never a measured duration.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CLI_MAIN = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export class CliProcess {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  readonly stdout: string[] = [];
  readonly #exited: Promise<Exit>;
  #buf = '';

  constructor(args: readonly string[], env: Readonly<Record<string, string>>) {
    this.child = spawn(process.execPath, [CLI_MAIN, ...args], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8');
    this.child.stdout!.on('data', (c: string) => this.stdout.push(c));
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (c: string) => {
      this.#buf += c;
      let nl: number;
      while ((nl = this.#buf.indexOf('\n')) >= 0) {
        this.lines.push(this.#buf.slice(0, nl));
        this.#buf = this.#buf.slice(nl + 1);
      }
    });
    this.#exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  /** Parsed JSON log records so far. */
  get records(): Array<Record<string, unknown>> {
    const out: Array<Record<string, unknown>> = [];
    for (const l of this.lines) {
      try {
        const r: unknown = JSON.parse(l);
        if (typeof r === 'object' && r !== null) out.push(r as Record<string, unknown>);
      } catch {
        // not a log record
      }
    }
    return out;
  }

  hasLog(msg: string): boolean {
    return this.records.some((r) => r.msg === msg);
  }

  /** Polls until a log record with `msg` appears; throws if the process exits first or `boundMs` pass. */
  async waitForLog(msg: string, boundMs = 30_000): Promise<Record<string, unknown>> {
    const until = Date.now() + boundMs;
    for (;;) {
      const rec = this.records.find((r) => r.msg === msg);
      if (rec) return rec;
      if (this.child.exitCode !== null || this.child.signalCode !== null) throw new Error(`exited before logging ${JSON.stringify(msg)}:\n${this.tail()}`);
      if (Date.now() > until) throw new Error(`no ${JSON.stringify(msg)} log line:\n${this.tail()}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** The exit, or undefined (and the process killed) when it is still running after `boundMs`. */
  async exit(boundMs: number): Promise<Exit | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), boundMs)));
    const result = await Promise.race([this.#exited, bound]);
    clearTimeout(timer);
    if (result === undefined) {
      this.kill();
      await this.#exited;
    }
    return result;
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }

  tail(n = 30): string {
    return this.lines.slice(-n).join('\n');
  }
}
