/**
 * Running commands for the applier: a small `CommandRunner` interface (the applier's only way
 * to reach the system) and the real one, which spawns processes, optionally inside a network
 * namespace through `nsenter --net=<path>`.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { IptablesError } from './errors.js';

export interface CommandResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CommandRunner {
  /** Runs `cmd args` (with `stdin` when given); resolves with the exit code, never throws on non-zero. */
  run(cmd: string, args: readonly string[], stdin?: string): Promise<CommandResult>;
  /** Whether `cmd` is installed (looked up on PATH and the sbin directories). */
  has(cmd: string): boolean;
}

const EXTRA_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin', '/bin'];

export function findBinary(cmd: string, path: string | undefined = process.env.PATH): string | undefined {
  if (cmd.includes('/')) return cmd;
  const dirs = [...(path ?? '').split(delimiter).filter((d) => d !== ''), ...EXTRA_DIRS];
  for (const dir of dirs) {
    const full = join(dir, cmd);
    try {
      accessSync(full, fsConstants.X_OK);
      return full;
    } catch {
      // not here
    }
  }
  return undefined;
}

export interface SystemRunnerOptions {
  /** Run every command inside this network namespace (e.g. /var/run/netns/x, /proc/PID/ns/net). */
  readonly netnsPath?: string;
  /** Kill a command that runs longer than this (default 30 s). */
  readonly timeoutMs?: number;
  /** Kill running commands (SIGKILL) and refuse new ones once this aborts (a caller's budget). */
  readonly signal?: AbortSignal;
}

/** The real runner: child processes, inside `netnsPath` when given. */
export function systemRunner(options: SystemRunnerOptions = {}): CommandRunner {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const binCache = new Map<string, string | undefined>();
  const lookup = (cmd: string) => {
    if (!binCache.has(cmd)) binCache.set(cmd, findBinary(cmd));
    return binCache.get(cmd);
  };
  return {
    has: (cmd) => lookup(cmd) !== undefined,
    run(cmd, args, stdin) {
      const bin = lookup(cmd);
      if (bin === undefined) {
        return Promise.reject(new IptablesError('ERR_IPTABLES_BINARY_MISSING', `${cmd} is not installed`));
      }
      let file = bin;
      let argv = [...args];
      if (options.netnsPath !== undefined) {
        const nsenter = lookup('nsenter');
        if (nsenter === undefined) {
          return Promise.reject(new IptablesError('ERR_IPTABLES_BINARY_MISSING', 'nsenter is not installed'));
        }
        file = nsenter;
        argv = [`--net=${options.netnsPath}`, '--', bin, ...args];
      }
      const signal = options.signal;
      if (signal?.aborted) return Promise.reject(new IptablesError('ERR_IPTABLES_COMMAND', `${cmd} not started: ${String(signal.reason)}`, signal.reason));
      return new Promise<CommandResult>((resolve, reject) => {
        const child = spawn(file, argv, { stdio: ['pipe', 'pipe', 'pipe'], timeout: timeoutMs, ...(signal ? { signal, killSignal: 'SIGKILL' as const } : {}) });
        const out: Buffer[] = [];
        const err: Buffer[] = [];
        child.stdout.on('data', (d: Buffer) => out.push(d));
        child.stderr.on('data', (d: Buffer) => err.push(d));
        child.on('error', (e) =>
          reject(new IptablesError('ERR_IPTABLES_COMMAND', `${cmd} could not be started: ${e.message}`, e)),
        );
        child.on('close', (code, signal) =>
          resolve({
            code: code ?? (signal !== null ? 128 : 1),
            stdout: Buffer.concat(out).toString('utf8'),
            stderr: Buffer.concat(err).toString('utf8'),
          }),
        );
        child.stdin.on('error', () => {
          // The command may exit before reading stdin; its exit code tells what happened.
        });
        child.stdin.end(stdin ?? '');
      });
    },
  };
}

/** Runs and throws ERR_IPTABLES_COMMAND on a non-zero exit (message carries the command's stderr). */
export async function runChecked(
  runner: CommandRunner,
  cmd: string,
  args: readonly string[],
  stdin?: string,
): Promise<CommandResult> {
  const r = await runner.run(cmd, args, stdin);
  if (r.code !== 0) {
    const detail = r.stderr.trim().split('\n').slice(-5).join('; ');
    throw new IptablesError('ERR_IPTABLES_COMMAND', `${cmd} ${args.join(' ')} exited ${r.code}: ${detail}`);
  }
  return r;
}

/** Throws ERR_IPTABLES_NETNS unless `path` (a netns file such as /var/run/netns/x) can be opened. */
export async function assertNetns(path: string): Promise<void> {
  try {
    await access(path, fsConstants.R_OK);
  } catch (err) {
    throw new IptablesError('ERR_IPTABLES_NETNS', `network namespace ${path} does not exist or cannot be opened`, err);
  }
}
