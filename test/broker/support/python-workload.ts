/**
 * Python grpcio Workload API clients (support/workload_api_client.py) as real processes, each
 * placed in a kubelet-style pod cgroup before it connects; their JSON lines in order. Shared by the
 * Workload API end-to-end tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { protoRootFor } from '../../../src/grpc/index.js';
import { WORKLOAD_API_PROTO } from '../../../src/protocol/workload-api.js';
import { podPath, type KubeletCgroups } from '../../../src/cli/kube-cgroups.js';
import { TEST_PYTHON, writePythonGrpcStubs } from '../../support/tools.js';

const PY_CLIENT = [
  fileURLToPath(new URL('./workload_api_client.py', import.meta.url)),
  fileURLToPath(new URL('../../../../test/broker/support/workload_api_client.py', import.meta.url)),
].find((p) => existsSync(p))!;

export interface SvidJson {
  svids: Array<{ spiffe_id: string; x509_svid: string; x509_svid_key: string; bundle: string; hint: string }>;
  crl: number;
  federated_bundles: Record<string, string>;
}
export type WorkloadLine = SvidJson & { code?: string; details?: string; bundles?: Record<string, string>; served?: boolean; ended?: boolean };

export interface WorkloadOptions {
  /** The cgroup (relative to the v2 root) the process is moved to before it connects; none: it stays a host process. */
  readonly cgroup?: string;
  /** Send `workload.spiffe.io: true` (default true). */
  readonly header?: boolean;
  /** Messages to read before it exits (default 1). */
  readonly count?: number;
}

/** A container cgroup of pod `uid` (systemd driver, Burstable, containerd). */
export function containerCgroup(uid: string): string {
  return podPath({ driver: 'systemd', qos: 'burstable', uid, container: { runtime: 'containerd', id: randomBytes(32).toString('hex') } });
}

/** Generates the Python stubs from the upstream proto into `dir`. */
export async function generatePythonStubs(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writePythonGrpcStubs(protoRootFor(WORKLOAD_API_PROTO), dir, [WORKLOAD_API_PROTO]);
}

/** One Python workload. */
export class Workload {
  readonly child: ChildProcess;
  readonly #lines: WorkloadLine[] = [];
  readonly #waiters: Array<() => void> = [];
  #closed = false;

  constructor(cgroups: KubeletCgroups, stubs: string, endpoint: string, rpc: string, options: WorkloadOptions) {
    this.child = spawn(TEST_PYTHON, [PY_CLIENT, stubs, endpoint, rpc, options.header === false ? '0' : '1', String(options.count ?? 1)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    createInterface({ input: this.child.stdout! })
      .on('line', (l) => {
        this.#lines.push(JSON.parse(l) as WorkloadLine);
        this.#waiters.splice(0).forEach((w) => w());
      })
      .on('close', () => {
        this.#closed = true;
        this.#waiters.splice(0).forEach((w) => w());
      });
    if (options.cgroup) cgroups.place(this.child.pid!, options.cgroup);
    this.child.stdin!.write('go\n');
  }

  /** The `n`-th line (0-based), waiting for it. */
  async line(n: number): Promise<WorkloadLine> {
    while (this.#lines.length <= n) {
      if (this.#closed) throw new Error(`workload ended after ${this.#lines.length} lines`);
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
    return this.#lines[n]!;
  }

  /** Kills it and waits for its exit (its connection is closed then). */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGKILL');
    await exited;
  }
}

/** Starts workloads on one endpoint and kills whatever is left at the end. */
export class PythonWorkloads {
  readonly #live = new Set<Workload>();

  constructor(
    readonly cgroups: KubeletCgroups,
    readonly stubs: string,
    readonly endpoint: string,
  ) {}

  start(rpc: string, options: WorkloadOptions = {}): Workload {
    const w = new Workload(this.cgroups, this.stubs, this.endpoint, rpc, options);
    this.#live.add(w);
    w.child.on('exit', () => this.#live.delete(w));
    return w;
  }

  async killAll(): Promise<void> {
    await Promise.all([...this.#live].map((w) => w.kill()));
  }
}
