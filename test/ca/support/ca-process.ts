/**
 * `certbroker ca` as a child process in tests: a launcher file for the subcommand module and a
 * reader of its JSON log lines on stderr.
 */
import type { ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Writes `<dir>/certbroker-ca.mjs`, which runs the `ca` subcommand module (src/cli/ca.ts) with
 * its arguments, and returns its path. A launcher file rather than `node -e`: worker threads
 * inherit execArgv, and --input-type would break the signing workers.
 */
export async function writeCaLauncher(dir: string): Promise<string> {
  const cliModule = fileURLToPath(new URL('../../../src/cli/ca.js', import.meta.url));
  const launcher = join(dir, 'certbroker-ca.mjs');
  await writeFile(launcher, `const m = await import(${JSON.stringify(cliModule)});\nawait m.command().parseAsync(process.argv.slice(2), { from: 'user' });\n`);
  return launcher;
}

export type LogRecord = Record<string, unknown>;

export interface ChildLog {
  /** Every stderr line so far, log record or not. */
  readonly lines: string[];
  /** The first log record (so far or later) satisfying `pred`; rejects if the child exits without one. */
  waitFor(pred: (rec: LogRecord) => boolean): Promise<LogRecord>;
}

/** Reads `child`'s stderr from now on, line by line. */
export function watchLog(child: ChildProcess): ChildLog {
  const lines: string[] = [];
  const records: LogRecord[] = [];
  const waiters = new Set<{ pred: (rec: LogRecord) => boolean; resolve: (rec: LogRecord) => void; reject: (err: Error) => void }>();
  let exitError: Error | undefined;
  let buf = '';
  child.stderr?.on('data', (c: Buffer) => {
    buf += c.toString();
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      lines.push(line);
      let rec: unknown;
      try {
        rec = JSON.parse(line);
      } catch {
        continue; // not a log line
      }
      if (typeof rec !== 'object' || rec === null) continue;
      records.push(rec as LogRecord);
      for (const w of waiters) {
        if (w.pred(rec as LogRecord)) {
          waiters.delete(w);
          w.resolve(rec as LogRecord);
        }
      }
    }
  });
  child.once('exit', (code) => {
    exitError = new Error(`exited ${code} before the expected log line:\n${lines.join('\n')}`);
    for (const w of waiters) w.reject(exitError);
    waiters.clear();
  });
  return {
    lines,
    waitFor(pred) {
      const seen = records.find(pred);
      if (seen) return Promise.resolve(seen);
      if (exitError) return Promise.reject(exitError);
      return new Promise((resolve, reject) => waiters.add({ pred, resolve, reject }));
    },
  };
}

export interface CaProcess {
  readonly child: ChildProcess;
  readonly log: ChildLog;
  /** The gRPC port from its `CA listening` line. */
  readonly port: number;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/**
 * `certbroker ca <args>` as a child process (launcher in `dir`), resolved once it logs `CA
 * listening`; env is the test process's plus `env`. Killed if it never gets there.
 */
export async function startCaProcess(dir: string, args: readonly string[], env: Readonly<Record<string, string>>, options: { readonly cwd?: string } = {}): Promise<CaProcess> {
  const { spawn } = await import('node:child_process');
  const launcher = await writeCaLauncher(dir);
  const child = spawn(process.execPath, [launcher, ...args], { env: { ...process.env, LOG_LEVEL: 'info', CA_SHUTDOWN_GRACE_SECONDS: '1', ...env }, stdio: ['ignore', 'ignore', 'pipe'], ...(options.cwd ? { cwd: options.cwd } : {}) });
  const log = watchLog(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    return exited;
  };
  try {
    const listening = await log.waitFor((r) => r.msg === 'CA listening');
    return { child, log, port: Number(listening.port), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
