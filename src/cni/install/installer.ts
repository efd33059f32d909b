/**
 * The filesystem adapter of install-cni: puts the binaries, the kubeconfig and the chained
 * config on the host, checks they are still there and still ours, and takes them away.
 * Every `ensure*` method is idempotent and writes only when the file on disk differs from
 * what it should be, so our own writes do not keep the watchers busy.
 *
 * The primary CNI config is another component's file, so it is handled with care:
 * - only the primary is ever edited (`primary-chooser.ts` over `decidePrimary`: the lexically
 *   first valid config, waiting while the one we chained into, or an earlier empty file, is
 *   mid-write, never moving on to an unrelated file in that moment);
 * - each edit is a compare-and-swap (`config-chainer.ts` over `cas-file.ts`), so a write the
 *   primary CNI makes while we work is never overwritten with its older content;
 * - whether anything needs doing is decided by content: the file must equal its own primary part
 *   with our entry chained in exactly once, last;
 * - what we chained from and which files we chained into are kept in a small state file in the
 *   run dir (`install-state.ts`), so uninstall (`config-unchainer.ts`), in this process or a later
 *   one, puts back exactly those bytes (a lone `X.conf` we turned into `X.conflist` comes back as
 *   `X.conf`) and touches no file we did not chain into.
 */
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Secret } from '../../core/secret.js';
import { removeStaleTemps, writeFileAtomic } from '../../ops/atomic-file.js';
import type { CasOptions } from './cas-file.js';
import { ConfigChainer, type ConfigOutcome, type ConfigParts } from './config-chainer.js';
import { ConfigUnchainer } from './config-unchainer.js';
import type { InstallConfig } from './config.js';
import { InstallError } from './errors.js';
import { durable, readText, readTextSync, removeIfPresent } from './host-fs.js';
import { InstallStateFile } from './install-state.js';
import { InstalledBinaries } from './installed-binaries.js';
import type { JsonObject } from './json.js';
import { renderKubeconfig } from './kubeconfig.js';
import { buildPluginEntry } from './plugin-entry.js';
import { PrimaryChooser } from './primary-chooser.js';

export type { ConfigOutcome } from './config-chainer.js';
export { STATE_FILENAME } from './install-state.js';

/** What the installer reports besides its results (the daemon turns them into logs and metrics). */
export interface InstallerEvents {
  /** A compare-and-swap found the file changed since it was read: nothing was written over it; read again. */
  conflict?(file: string, reason: string): void;
  /** The primary stayed absent/empty/unloadable past PRIMARY_CONFIG_WAIT_SECONDS: the next valid file is used. */
  gaveUpWaiting?(file: string, reason: string): void;
}

export interface InstallerOptions {
  /** Clock reading for the primary-config wait limit (ms). */
  readonly now?: () => number;
  readonly events?: InstallerEvents;
  /** Test hook: runs inside each compare-and-swap, right before its last check and after its rename. */
  readonly onCommit?: CasOptions['onCommit'];
}

export class Installer {
  readonly #cfg: InstallConfig;
  readonly #entry: JsonObject;
  readonly #binaries: InstalledBinaries;
  readonly #state: InstallStateFile;
  readonly #chainer: ConfigChainer;
  readonly #unchainer: ConfigUnchainer;

  constructor(config: InstallConfig, options: InstallerOptions = {}) {
    this.#cfg = config;
    const events = options.events ?? {};
    this.#entry = buildPluginEntry({
      cniAgentRunDir: config.cniAgentRunDir,
      logLevel: config.pluginLogLevel,
      podNamespace: config.podNamespace,
      ambientEnabled: config.ambientEnabled,
      excludeNamespaces: config.excludeNamespaces,
      nativeNftables: config.nativeNftables,
      enableAmbientDetectionRetry: false,
      addTimeoutMs: config.pluginAddTimeoutMs,
    });
    this.#binaries = new InstalledBinaries(config);
    this.#state = new InstallStateFile(config.mountedCniAgentRunDir);
    const state = this.#state;
    const chooser = new PrimaryChooser(config, {
      now: options.now ?? Date.now,
      previous: () => state.current().primary,
      gaveUpWaiting: (file, reason) => events.gaveUpWaiting?.(file, reason),
    });
    const parts: ConfigParts = {
      config,
      entry: this.#entry,
      state,
      chooser,
      conflict: (file, reason) => events.conflict?.(file, reason),
      onCommit: options.onCommit,
    };
    this.#chainer = new ConfigChainer(parts);
    this.#unchainer = new ConfigUnchainer(parts);
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

  /** Copies every binary that is missing or differs from its source; returns their names. */
  ensureBinaries(): Promise<string[]> {
    return this.#binaries.ensure();
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

  /** Chains our entry into the primary config (or writes our own file in istio-owned mode). */
  ensureConfig(): Promise<ConfigOutcome> {
    return this.#chainer.ensure();
  }

  /**
   * Synchronous check for /readyz: undefined when the plugin is installed and valid, or the
   * first reason it is not. Binaries are compared by size and mtime, not hashed.
   */
  problem(): string | undefined {
    const binaries = this.#binaries.problem();
    if (binaries !== undefined) return binaries;
    if (readTextSync(this.kubeconfigPath) === undefined) return 'plugin kubeconfig is missing';
    return this.#chainer.problem();
  }

  /**
   * Takes our entry out of every config we chained into (and the current primary, should the
   * record be lost), putting back the primary CNI's own bytes where the file still is what we
   * made of them; then deletes the kubeconfig, the state file and the binaries. Files we did not
   * chain into are never touched.
   */
  async uninstall(): Promise<{ readonly config: string | undefined; readonly removed: readonly string[] }> {
    const config = await this.#unchainer.removeAll();
    const removed: string[] = [];
    if (await removeIfPresent(this.kubeconfigPath)) removed.push(this.#cfg.kubeconfigFilename);
    await removeIfPresent(this.#state.path);
    this.#state.reset();
    removed.push(...(await this.#binaries.remove()));
    await this.removeStaleTemps();
    return { config, removed };
  }

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
}
