/**
 * Runs a command inside a network namespace given by path (`CNI_NETNS`, e.g. /var/run/netns/x or
 * /proc/<pid>/ns/net): `nsenter --net=<path> -- cmd args`. Node cannot setns(2) itself, and
 * nsenter works for bind-mounted and /proc paths alike (`ip netns exec` only for named ones).
 */
import { spawn } from 'node:child_process';

export interface ExecResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface NetnsExecOptions {
  readonly netns: string;
  readonly stdin?: string;
  readonly timeoutMs?: number;
}

export function execInNetns(cmd: string, args: readonly string[], options: NetnsExecOptions): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = spawn('nsenter', [`--net=${options.netns}`, '--', cmd, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 10_000,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.stdin.on('error', () => {
      /* the command may exit before reading stdin; its exit code tells */
    });
    child.on('error', (e: NodeJS.ErrnoException) => resolve({ code: 127, stdout: '', stderr: `${cmd}: ${e.code ?? e.message}` }));
    child.on('close', (code, signal) =>
      resolve({
        code: code ?? (signal ? 128 : 1),
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8') + (signal ? `killed by ${signal}` : ''),
      }),
    );
    child.stdin.end(options.stdin ?? '');
  });
}
