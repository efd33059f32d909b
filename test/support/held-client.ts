/**
 * A client program started held: it was given its own flag to wait for one line on stdin before it
 * connects, so a test can first arrange things around the process (place it in a cgroup, stop the
 * server under it) and then let it go. Its last stdout line is its JSON result. Used for the Go and
 * Rust interop clients (grpc-go.ts, rust-main.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface HeldClient<T> {
  readonly child: ChildProcess;
  /** Lets the client connect. */
  go(): void;
  /** Its JSON result once it exits 0; rejects with its stderr otherwise. */
  result(): Promise<T>;
}

/** Starts `bin` with `args` (which must carry the program's hold flag); `name` labels its failures. */
export function spawnHeld<T>(name: string, bin: string, args: readonly string[]): HeldClient<T> {
  const child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return {
    child,
    go: () => child.stdin!.write('go\n'),
    async result() {
      const code = await exited;
      if (code !== 0 || lines.length === 0) throw new Error(`${name} ${args[0]} exited ${code}: ${stderr}`);
      return JSON.parse(lines[lines.length - 1]!) as T;
    },
  };
}
