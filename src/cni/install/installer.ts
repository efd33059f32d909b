/**
 * The filesystem adapter of install-cni: puts the binaries, the kubeconfig and the chained
 * config on the host, checks they are still there and still ours, and takes them away.
 * Every `ensure*` method is idempotent and writes only when the file on disk differs from
 * what it should be, so our own writes do not keep the watchers busy.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Secret } from '../../core/secret.js';
import { copyFileAtomic, removeStaleTemps, writeFileAtomic, type AtomicWriteOptions } from '../../ops/atomic-file.js';
import { chainPlugin, chainState, parseNetworkConfig, renderNetworkConfig, unchainPlugin } from './conflist.js';
import type { InstallConfig } from './config.js';
import { InstallError } from './errors.js';
import type { JsonObject } from './json.js';
import { renderKubeconfig } from './kubeconfig.js';
import { buildPluginEntry } from './plugin-entry.js';
import { selectPrimaryConfig, type ConfigDirEntry, type PrimarySelection } from './primary-config.js';

const BINARY_MODE = 0o755;
const DEFAULT_CONFIG_MODE = 0o644;

export type ConfigOutcome =
  | { readonly state: 'waiting'; readonly reason: string }
  | { readonly state: 'unchanged'; readonly file: string }
  | { readonly state: 'written'; readonly file: string; readonly previous: 'missing' | 'outdated' };

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** Host files are fsynced before the rename: a node crash leaves the old file or the new one. */
function durable(mode: number): AtomicWriteOptions {
  return { mode, sync: true };
}

/** unlink that treats "already gone" as success; returns whether a file was removed. */
async function removeIfPresent(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if (errno(err) === 'ENOENT') return false;
    throw err;
  }
}

function readTextSync(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if (errno(err) === 'ENOENT' || errno(err) === 'EISDIR') return undefined;
    throw err;
  }
}

interface InstalledBinary {
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
}

export class Installer {
  readonly #cfg: InstallConfig;
  readonly #entry: JsonObject;
  /** What each binary looked like right after we put it in place (inode, size, mtime). */
  readonly #installed = new Map<string, InstalledBinary>();

  constructor(config: InstallConfig) {
    this.#cfg = config;
    this.#entry = buildPluginEntry({
      cniAgentRunDir: config.cniAgentRunDir,
      logLevel: config.pluginLogLevel,
      podNamespace: config.podNamespace,
      ambientEnabled: config.ambientEnabled,
      excludeNamespaces: config.excludeNamespaces,
      nativeNftables: config.nativeNftables,
      enableAmbientDetectionRetry: false,
    });
  }

  /** The plugin entry this installer chains. */
  get pluginEntry(): JsonObject {
    return this.#entry;
  }

  get kubeconfigPath(): string {
    return join(this.#cfg.mountedCniAgentRunDir, this.#cfg.kubeconfigFilename);
  }

  /** Deletes temp files a crashed earlier run left in any dir we write to. */
  async removeStaleTemps(): Promise<string[]> {
    const dirs = [this.#cfg.mountedCniBinDir, this.#cfg.mountedCniNetDir, this.#cfg.mountedCniAgentRunDir];
    return (await Promise.all(dirs.map(removeStaleTemps))).flat();
  }

  // ---- binaries -------------------------------------------------------------------------

  /** Copies every binary that is missing or differs from its source; returns their names. */
  async ensureBinaries(): Promise<string[]> {
    await mkdir(this.#cfg.mountedCniBinDir, { recursive: true });
    const copied: string[] = [];
    for (const name of this.#cfg.binaries) {
      const source = join(this.#cfg.binariesSourceDir, name);
      let src;
      try {
        src = await stat(source);
      } catch (err) {
        throw new InstallError('ERR_CNI_BINARY_MISSING', `source binary ${source} is missing (${errno(err) ?? 'error'})`, err);
      }
      if (!src.isFile()) throw new InstallError('ERR_CNI_BINARY_MISSING', `source binary ${source} is not a regular file`);
      if (this.#binaryProblem(name, src) === undefined) continue;
      await copyFileAtomic(source, join(this.#cfg.mountedCniBinDir, name), { ...durable(BINARY_MODE), mtimeMs: src.mtimeMs });
      const dst = await stat(join(this.#cfg.mountedCniBinDir, name));
      this.#installed.set(name, { ino: dst.ino, size: dst.size, mtimeMs: dst.mtimeMs });
      copied.push(name);
    }
    return copied;
  }

  /**
   * Whether the installed binary is still the copy this process made: same inode, size and
   * mtime as right after our rename. Anyone replacing it (rename: new inode) or writing into
   * it (new mtime or size) shows up, without hashing large executables on every pass. A fresh
   * process has no record and copies once at start, which is also how upgrades land.
   */
  #binaryProblem(name: string, src: { size: number }): string | undefined {
    let dst;
    try {
      dst = statSync(join(this.#cfg.mountedCniBinDir, name));
    } catch {
      return `binary ${name} is missing`;
    }
    if (!dst.isFile()) return `binary ${name} is not a regular file`;
    if ((dst.mode & 0o111) === 0) return `binary ${name} is not executable`;
    const ours = this.#installed.get(name);
    if (ours === undefined) return `binary ${name} not installed by this process yet`;
    if (dst.size !== src.size || dst.ino !== ours.ino || dst.size !== ours.size || dst.mtimeMs !== ours.mtimeMs) {
      return `binary ${name} differs from ours`;
    }
    return undefined;
  }

  // ---- kubeconfig -----------------------------------------------------------------------

  #kubeconfigText(): string {
    const sa = this.#cfg.serviceAccountDir;
    const token = readTextSync(join(sa, 'token'));
    if (token === undefined) throw new InstallError('ERR_KUBECONFIG_INPUT_INVALID', `cannot read the service-account token in ${sa}`);
    const caFile = this.#cfg.kubeCaFile ?? join(sa, 'ca.crt');
    return renderKubeconfig({
      serviceHost: this.#cfg.serviceHost,
      servicePort: this.#cfg.servicePort,
      serviceProtocol: this.#cfg.serviceProtocol,
      caPem: this.#cfg.skipTlsVerify ? undefined : readTextSync(caFile),
      skipTlsVerify: this.#cfg.skipTlsVerify,
      token: new Secret(token),
    });
  }

  /** Writes the plugin kubeconfig when it is missing or stale (e.g. the token rotated). */
  async ensureKubeconfig(): Promise<boolean> {
    const wanted = this.#kubeconfigText();
    await mkdir(this.#cfg.mountedCniAgentRunDir, { recursive: true });
    const current = await readText(this.kubeconfigPath);
    let modeOk = false;
    if (current !== undefined) {
      modeOk = ((await stat(this.kubeconfigPath)).mode & 0o777) === this.#cfg.kubeconfigMode;
    }
    if (current === wanted && modeOk) return false;
    await writeFileAtomic(this.kubeconfigPath, wanted, durable(this.#cfg.kubeconfigMode));
    return true;
  }

  // ---- CNI config -----------------------------------------------------------------------

  #dirEntriesSync(): ConfigDirEntry[] {
    let names: string[];
    try {
      names = readdirSync(this.#cfg.mountedCniNetDir);
    } catch {
      return [];
    }
    return names.map((name) => ({ name, text: readTextSync(join(this.#cfg.mountedCniNetDir, name)) }));
  }

  async #dirEntries(): Promise<ConfigDirEntry[]> {
    let names: string[];
    try {
      names = await readdir(this.#cfg.mountedCniNetDir);
    } catch (err) {
      if (errno(err) === 'ENOENT') return [];
      throw err;
    }
    return Promise.all(names.map(async (name) => ({ name, text: await readText(join(this.#cfg.mountedCniNetDir, name)) })));
  }

  #select(entries: readonly ConfigDirEntry[]): PrimarySelection | undefined {
    return selectPrimaryConfig(entries, {
      configuredName: this.#cfg.cniConfName,
      ownFileName: this.#cfg.istioOwnedCniConfig ? this.#cfg.istioOwnedCniConfFilename : undefined,
    });
  }

  /** Chains our entry into the primary config (or writes our own file in istio-owned mode). */
  async ensureConfig(): Promise<ConfigOutcome> {
    const dir = this.#cfg.mountedCniNetDir;
    const entries = await this.#dirEntries();
    const primary = this.#select(entries);
    if (primary === undefined) {
      const what = this.#cfg.cniConfName === undefined ? 'no valid .conf/.conflist' : `${this.#cfg.cniConfName} not present`;
      return { state: 'waiting', reason: `${what} in ${dir}` };
    }
    const primaryText = entries.find((e) => e.name === primary.name)?.text ?? '';
    const primaryValue: unknown = parseNetworkConfig(primaryText, { source: primary.name }).value;
    const mode = (await stat(join(dir, primary.name))).mode & 0o7777;

    if (this.#cfg.istioOwnedCniConfig) {
      const own = this.#cfg.istioOwnedCniConfFilename;
      const wanted = chainPlugin(primaryValue, this.#entry, primary.name);
      const currentText = entries.find((e) => e.name === own)?.text;
      let previous: 'missing' | 'outdated' = 'missing';
      if (currentText !== undefined) {
        previous = 'outdated';
        try {
          if (JSON.stringify(JSON.parse(currentText)) === JSON.stringify(wanted)) return { state: 'unchanged', file: own };
        } catch {
          // unparseable: rewrite
        }
      }
      await writeFileAtomic(join(dir, own), renderNetworkConfig(wanted), durable(mode || DEFAULT_CONFIG_MODE));
      return { state: 'written', file: own, previous };
    }

    const state = chainState(primaryValue, this.#entry, primary.name);
    if (state === 'installed') return { state: 'unchanged', file: primary.name };
    const chained = chainPlugin(primaryValue, this.#entry, primary.name);
    const target = primary.name.endsWith('.conf') ? `${primary.name}list` : primary.name;
    await writeFileAtomic(join(dir, target), renderNetworkConfig(chained), durable(mode || DEFAULT_CONFIG_MODE));
    // A lone .conf became a .conflist: drop the .conf, which would otherwise sort first.
    if (target !== primary.name) await removeIfPresent(join(dir, primary.name));
    return { state: 'written', file: target, previous: state === 'missing' ? 'missing' : 'outdated' };
  }

  // ---- readiness ------------------------------------------------------------------------

  /**
   * Synchronous check for /readyz: undefined when the plugin is installed and valid, or the
   * first reason it is not. Binaries are compared by size and mtime, not hashed.
   */
  problem(): string | undefined {
    for (const name of this.#cfg.binaries) {
      let src;
      try {
        src = statSync(join(this.#cfg.binariesSourceDir, name));
      } catch {
        return `source binary ${name} is missing`;
      }
      const p = this.#binaryProblem(name, src);
      if (p !== undefined) return p;
    }
    if (readTextSync(this.kubeconfigPath) === undefined) return 'plugin kubeconfig is missing';
    const entries = this.#dirEntriesSync();
    const primary = this.#select(entries);
    if (primary === undefined) return `no primary CNI config in ${this.#cfg.mountedCniNetDir}`;
    const text = entries.find((e) => e.name === primary.name)?.text ?? '';
    try {
      const value: unknown = JSON.parse(text);
      if (this.#cfg.istioOwnedCniConfig) {
        const own = entries.find((e) => e.name === this.#cfg.istioOwnedCniConfFilename)?.text;
        if (own === undefined) return `${this.#cfg.istioOwnedCniConfFilename} is missing`;
        if (JSON.stringify(JSON.parse(own)) !== JSON.stringify(chainPlugin(value, this.#entry))) {
          return `${this.#cfg.istioOwnedCniConfFilename} is out of date`;
        }
        if (this.#cfg.istioOwnedCniConfFilename > primary.name) {
          return `${this.#cfg.istioOwnedCniConfFilename} sorts after the primary ${primary.name}; the runtime will not use it`;
        }
        return undefined;
      }
      const state = chainState(value, this.#entry, primary.name);
      return state === 'installed' ? undefined : `istio-cni entry ${state} in ${primary.name}`;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  }

  // ---- removal --------------------------------------------------------------------------

  /** Takes our entry out of the config, then deletes the kubeconfig and the binaries. */
  async uninstall(): Promise<{ readonly config: string | undefined; readonly removed: readonly string[] }> {
    const dir = this.#cfg.mountedCniNetDir;
    let config: string | undefined;
    if (this.#cfg.istioOwnedCniConfig) {
      if (await removeIfPresent(join(dir, this.#cfg.istioOwnedCniConfFilename))) config = this.#cfg.istioOwnedCniConfFilename;
    } else {
      // Every loadable config, not only the primary: a config we chained into earlier may no
      // longer be first (the primary CNI added a new file), and must still be cleaned.
      for (const entry of await this.#dirEntries()) {
        if (entry.text === undefined || !(entry.name.endsWith('.conf') || entry.name.endsWith('.conflist'))) continue;
        let out;
        try {
          out = unchainPlugin(JSON.parse(entry.text), entry.name);
        } catch {
          continue; // not a config we can read, so not one we wrote into
        }
        if (out.kind === 'untouched') continue;
        const mode = (await stat(join(dir, entry.name))).mode & 0o7777;
        if (out.kind === 'empty') await removeIfPresent(join(dir, entry.name));
        else await writeFileAtomic(join(dir, entry.name), renderNetworkConfig(out.config), durable(mode || DEFAULT_CONFIG_MODE));
        config = entry.name;
      }
    }
    const removed: string[] = [];
    if (await removeIfPresent(this.kubeconfigPath)) removed.push(this.#cfg.kubeconfigFilename);
    for (const name of this.#cfg.binaries) {
      if (await removeIfPresent(join(this.#cfg.mountedCniBinDir, name))) removed.push(name);
    }
    await this.removeStaleTemps();
    return { config, removed };
  }
}
