/**
 * A small CNI runtime for tests, following the CNI spec the way a container runtime (libcni)
 * does: each plugin of a conflist is executed from CNI_PATH with CNI_COMMAND, CNI_CONTAINERID,
 * CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH in its environment and its config on stdin — the
 * plugin's object plus the list's `name` and `cniVersion`, and `prevResult` (ADD: the previous
 * plugin's result; DEL/CHECK: the cached result of the ADD). ADD runs the list in order, DEL in
 * reverse, VERSION/STATUS/GC per plugin.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export interface ExecOutcome {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ExecPluginOptions {
  readonly command: string;
  readonly args?: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  /** undefined: stdin is closed at once with nothing written. */
  readonly stdin?: string;
  readonly timeoutMs?: number;
}

/** Runs one plugin executable and collects its output. */
export function execPlugin(options: ExecPluginOptions): Promise<ExecOutcome> {
  return new Promise((resolve, reject) => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };
    for (const [k, v] of Object.entries(options.env)) if (v !== undefined) env[k] = v;
    const child = spawn(options.command, [...(options.args ?? [])], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 60_000,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.stdin.on('error', () => undefined);
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolve({
        code: code ?? (signal ? 128 : 1),
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
    child.stdin.end(options.stdin ?? '');
  });
}

export interface Conflist {
  readonly cniVersion: string;
  readonly name: string;
  readonly plugins: ReadonlyArray<Record<string, unknown> & { type: string }>;
}

export interface Attachment {
  readonly containerId: string;
  readonly netns: string;
  readonly ifname: string;
  /** K=V;K=V as CNI_ARGS. */
  readonly args: string;
}

export class CniPluginError extends Error {
  readonly plugin: string;
  readonly outcome: ExecOutcome;
  readonly result: { code?: number; msg?: string; details?: string } | undefined;
  constructor(plugin: string, command: string, outcome: ExecOutcome) {
    let parsed: { code?: number; msg?: string; details?: string } | undefined;
    try {
      parsed = JSON.parse(outcome.stdout) as typeof parsed;
    } catch {
      parsed = undefined;
    }
    super(`${plugin} ${command} failed (exit ${outcome.code}): ${parsed?.msg ?? outcome.stdout.trim()} ${parsed?.details ?? ''} ${outcome.stderr.trim().slice(-400)}`);
    this.plugin = plugin;
    this.outcome = outcome;
    this.result = parsed;
  }
}

export interface CniRuntimeOptions {
  /** Directories searched for plugin executables (CNI_PATH). */
  readonly cniPath: readonly string[];
  /** Extra environment for every plugin (e.g. DRY_RUN_FILE_PATH). */
  readonly extraEnv?: Readonly<Record<string, string>>;
}

export class CniRuntime {
  readonly #opts: CniRuntimeOptions;
  /** The cached ADD result per container, as a runtime keeps it for DEL and CHECK. */
  readonly #cache = new Map<string, Record<string, unknown>>();

  constructor(options: CniRuntimeOptions) {
    this.#opts = options;
  }

  #env(command: string, a: Attachment | undefined): Record<string, string> {
    return {
      ...this.#opts.extraEnv,
      CNI_COMMAND: command,
      CNI_PATH: this.#opts.cniPath.join(':'),
      ...(a ? { CNI_CONTAINERID: a.containerId, CNI_NETNS: a.netns, CNI_IFNAME: a.ifname, CNI_ARGS: a.args } : {}),
    };
  }

  async #exec(list: Conflist, plugin: Record<string, unknown> & { type: string }, command: string, a: Attachment | undefined, prev?: unknown) {
    const config: Record<string, unknown> = { ...plugin, name: list.name, cniVersion: list.cniVersion };
    if (prev !== undefined) config.prevResult = prev;
    const outcome = await execPlugin({
      command: this.#find(plugin.type),
      env: this.#env(command, a),
      stdin: JSON.stringify(config),
    });
    if (outcome.code !== 0) throw new CniPluginError(plugin.type, command, outcome);
    return outcome;
  }

  #find(type: string): string {
    for (const dir of this.#opts.cniPath) {
      const p = join(dir, type);
      if (existsSync(p)) return p;
    }
    throw new Error(`plugin ${type} not found in CNI_PATH ${this.#opts.cniPath.join(':')}`);
  }

  /** ADD through the list; returns the final result (what the runtime caches). */
  async add(list: Conflist, a: Attachment): Promise<Record<string, unknown>> {
    let prev: unknown;
    for (const plugin of list.plugins) {
      const outcome = await this.#exec(list, plugin, 'ADD', a, prev);
      prev = JSON.parse(outcome.stdout) as unknown;
    }
    const result = prev as Record<string, unknown>;
    this.#cache.set(a.containerId, result);
    return result;
  }

  /** DEL in reverse order with the cached result as prevResult. */
  async del(list: Conflist, a: Attachment): Promise<void> {
    const cached = this.#cache.get(a.containerId);
    for (const plugin of [...list.plugins].reverse()) await this.#exec(list, plugin, 'DEL', a, cached);
    this.#cache.delete(a.containerId);
  }

  async check(list: Conflist, a: Attachment): Promise<void> {
    const cached = this.#cache.get(a.containerId);
    for (const plugin of list.plugins) await this.#exec(list, plugin, 'CHECK', a, cached);
  }
}
