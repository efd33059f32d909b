/**
 * Real TCP traffic for the end-to-end tests: listeners inside a pod's network namespace (each
 * answers with its own name, so the test sees where a connection landed) and one-shot clients run
 * inside the namespace under a chosen uid/gid, through nsenter.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createConnection, createServer, type Server } from 'node:net';

export interface PodListeners {
  stop(): void;
}

/** Starts one process in `netnsPath` (as uid/gid) listening on each port, answering `name\n`. */
export function startPodListeners(netnsPath: string, ports: Record<number, string>, ids: { uid: number; gid: number }): Promise<PodListeners> {
  const script = `
const net = require('node:net');
const ports = ${JSON.stringify(ports)};
let up = 0;
for (const [port, name] of Object.entries(ports)) {
  // '::' takes IPv4 too (dual-stack socket), so one listener serves both families.
  net.createServer((s) => s.end(name + '\\n')).listen(Number(port), '::', () => {
    if (++up === Object.keys(ports).length) process.stdout.write('ready\\n');
  });
}
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
`;
  const child: ChildProcess = spawn(
    'nsenter',
    [`--net=${netnsPath}`, `--setuid=${ids.uid}`, `--setgid=${ids.gid}`, '--', process.execPath, '-e', script],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    child.stdout!.on('data', (c: Buffer) => {
      if (c.toString().includes('ready')) resolve({ stop: () => child.kill('SIGKILL') });
    });
    child.on('exit', (code) => reject(new Error(`pod listeners exited (${code}): ${err}`)));
  });
}

/** Connects from inside `netnsPath` as uid/gid to host:port; resolves with what the server said. */
export function podClient(netnsPath: string, target: { host: string; port: number }, ids: { uid: number; gid: number }): Promise<string> {
  const script = `
const s = require('node:net').connect(${target.port}, ${JSON.stringify(target.host)});
let d = '';
s.setTimeout(5000, () => { console.error('timeout'); process.exit(3); });
s.on('data', (c) => (d += c));
s.on('end', () => { process.stdout.write(d); process.exit(0); });
s.on('error', (e) => { console.error(e.code || e.message); process.exit(2); });
`;
  return new Promise((resolve, reject) => {
    const child = spawn('nsenter', [`--net=${netnsPath}`, `--setuid=${ids.uid}`, `--setgid=${ids.gid}`, '--', process.execPath, '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('close', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`client exited ${code}: ${err.trim()}`))));
  });
}

/** A one-shot client in the caller's (host) namespace. */
export function hostClient(target: { host: string; port: number }): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = createConnection(target.port, target.host);
    let d = '';
    s.setTimeout(5000, () => s.destroy(new Error('timeout')));
    s.on('data', (c: Buffer) => (d += c.toString()));
    s.on('end', () => resolve(d.trim()));
    s.on('error', reject);
  });
}

/** A listener in the host namespace answering `name\n`. */
export function hostListener(host: string, port: number, name: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((s) => s.end(name + '\n'));
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
