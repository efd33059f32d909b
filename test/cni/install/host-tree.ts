/**
 * Test fixture: a temp "host" tree for install-cni (CNI config dir, CNI bin dir, agent run dir,
 * a projected service-account dir, binaries to copy) and a helper that runs the real daemon
 * as a child process, following its JSON log lines and its ops port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPluginEntry } from '../../../src/cni/install/index.js';
import { INSTALL_CNI_FIXTURES } from '../../support/fixtures.js';
import { removeTempDirSync, tempDirSync } from '../../support/scratch.js';

/** Istio's install-cni test data, with a trailing slash (callers append file names). */
export const CONFORMANCE = INSTALL_CNI_FIXTURES + '/';
const CLI = fileURLToPath(new URL('../../../src/cli/main.js', import.meta.url));

export interface HostTree {
  readonly root: string;
  readonly netDir: string;
  readonly binDir: string;
  readonly runDir: string;
  readonly saDir: string;
  readonly srcDir: string;
  readonly binaries: Readonly<Record<string, Buffer>>;
  cleanup(): void;
}

export function makeHostTree(): HostTree {
  const root = tempDirSync('install-cni-');
  const dirs = {
    netDir: join(root, 'host/etc/cni/net.d'),
    binDir: join(root, 'host/opt/cni/bin'),
    runDir: join(root, 'host/var/run/istio-cni'),
    saDir: join(root, 'sa'),
    srcDir: join(root, 'image/bin'),
  };
  for (const d of Object.values(dirs)) mkdirSync(d, { recursive: true });
  const binaries = {
    'istio-cni': Buffer.concat([Buffer.from('#!/bin/sh\necho istio-cni\n'), randomBytes(4096)]),
    'istio-iptables': Buffer.concat([Buffer.from('#!/bin/sh\necho istio-iptables\n'), randomBytes(2048)]),
  };
  for (const [name, data] of Object.entries(binaries)) writeFileSync(join(dirs.srcDir, name), data, { mode: 0o755 });
  writeFileSync(join(dirs.saDir, 'token'), 'token-one');
  writeFileSync(join(dirs.saDir, 'ca.crt'), readFileSync(CONFORMANCE + 'kube-ca.crt'));
  const cleanup = () => {
    // A daemon still running on the tree would write into it while it is removed (and keep
    // running after the test process: install-cni runs until a signal). Stop it first.
    killDaemonsSync(root);
    rmSync(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 });
    removeTempDirSync(root);
  };
  return { root, ...dirs, binaries, cleanup };
}

/** Daemons this test process started that have not exited yet. */
const liveDaemons = new Set<DaemonProcess>();
let exitHookInstalled = false;

/**
 * SIGKILLs the live daemons (those using the tree at `root`, or all). Also run when the test
 * process exits, before the scratch directories are removed: node's runner skips the remaining
 * `after` hooks once one throws, and a test that fails before its `daemon.stop()` would
 * otherwise leave the daemon running (and writing into its tree) after the run.
 */
function killDaemonsSync(root?: string): void {
  for (const d of liveDaemons) if (root === undefined || d.uses(root)) d.child.kill('SIGKILL');
}

export function treeEnv(tree: HostTree, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    MOUNTED_CNI_NET_DIR: tree.netDir,
    MOUNTED_CNI_BIN_DIR: tree.binDir,
    CNI_BINARIES_SOURCE_DIR: tree.srcDir,
    CNI_AGENT_RUN_DIR: '/var/run/istio-cni',
    MOUNTED_CNI_AGENT_RUN_DIR: tree.runDir,
    SERVICE_ACCOUNT_DIR: tree.saDir,
    KUBERNETES_SERVICE_HOST: '10.96.0.1',
    KUBERNETES_SERVICE_PORT: '443',
    POD_NAMESPACE: 'istio-system',
    NODE_NAME: 'node-a',
    MONITORING_HOST: '127.0.0.1',
    MONITORING_PORT: '0',
    RESYNC_INTERVAL_SECONDS: '1',
    REPAIR_ENABLED: 'false',
    LOG_LEVEL: 'debug',
    ...extra,
  };
}

/** The plugin entry the daemon chains into the primary when run with `treeEnv()`'s settings. */
export const TREE_ENTRY = buildPluginEntry({
  cniAgentRunDir: '/var/run/istio-cni',
  logLevel: 'info',
  podNamespace: 'istio-system',
  ambientEnabled: false,
  excludeNamespaces: [],
  nativeNftables: false,
  enableAmbientDetectionRetry: false,
});

export interface LogRecord {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

export class DaemonProcess {
  readonly child: ChildProcess;
  readonly logs: LogRecord[] = [];
  readonly rawStderr: string[] = [];
  readonly #exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #buffer = '';

  readonly #env: Record<string, string>;

  /** Runs the real `certbroker install-cni` CLI with `env` (and nothing else) as its environment. */
  constructor(env: Record<string, string>) {
    this.#env = env;
    this.child = spawn(process.execPath, [CLI, 'install-cni'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    liveDaemons.add(this);
    this.child.once('exit', () => liveDaemons.delete(this));
    if (!exitHookInstalled) {
      // First among the exit listeners, so a daemon is gone before its tree is removed.
      process.prependOnceListener('exit', () => killDaemonsSync());
      exitHookInstalled = true;
    }
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (chunk: string) => {
      this.#buffer += chunk;
      let nl;
      while ((nl = this.#buffer.indexOf('\n')) >= 0) {
        const line = this.#buffer.slice(0, nl);
        this.#buffer = this.#buffer.slice(nl + 1);
        this.rawStderr.push(line);
        try {
          this.logs.push(JSON.parse(line) as LogRecord);
        } catch {
          // not a log record (e.g. the CLI's fatal error line)
        }
      }
    });
    this.#exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
    // A daemon nobody waits for does not keep the test process alive: when a test fails (or an
    // after hook throws) before its daemon.stop(), the process still ends and its exit hook
    // kills the daemon, instead of the file hanging on the daemon's open pipe. Waiting for the
    // daemon's exit holds the process again (`exited`).
    this.child.unref();
    (this.child.stderr as Socket).unref();
  }

  /** Resolves when the daemon exits; while someone waits for it, it keeps the test process alive. */
  get exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.ref();
      (this.child.stderr as Socket).ref();
    }
    return this.#exited;
  }

  /** Whether this daemon's environment points into `root` (its host tree). */
  uses(root: string): boolean {
    return Object.values(this.#env).some((v) => v === root || v.startsWith(`${root}/`));
  }

  get opsPort(): number | undefined {
    const rec = this.logs.find((l) => l.msg === 'ops endpoint listening');
    return typeof rec?.port === 'number' ? rec.port : undefined;
  }

  async get(path: string): Promise<{ status: number; body: string }> {
    const port = await waitFor(() => this.opsPort, 'ops port', this);
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: res.status, body: await res.text() };
  }

  hasLog(msg: string): boolean {
    return this.logs.some((l) => l.msg === msg);
  }

  countLogs(msg: string): number {
    return this.logs.filter((l) => l.msg === msg).length;
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exited;
  }

  describe(): string {
    return this.rawStderr.slice(-30).join('\n');
  }
}

/**
 * Polls `probe` until it returns a value other than undefined/false. The deadline is only a
 * guard against hanging; nothing asserts how long it took.
 */
export async function waitFor<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  daemon?: DaemonProcess,
  deadlineMs = 20_000,
): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (daemon !== undefined && daemon.child.exitCode !== null) {
      throw new Error(`daemon exited (${daemon.child.exitCode}) while waiting for ${what}\n${daemon.describe()}`);
    }
    if (Date.now() - start > deadlineMs) {
      throw new Error(`gave up waiting for ${what}${daemon ? `\n${daemon.describe()}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
