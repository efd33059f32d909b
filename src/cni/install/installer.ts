/**
 * The filesystem adapter of install-cni: puts the binaries, the kubeconfig and the chained
 * config on the host, checks they are still there and still ours, and takes them away.
 * Every `ensure*` method is idempotent and writes only when the file on disk differs from
 * what it should be, so our own writes do not keep the watchers busy.
 *
 * The primary CNI config is another component's file, so it is handled with care:
 * - only the primary is ever edited (`decidePrimary`: the lexically first valid config, waiting
 *   while the one we chained into, or an earlier empty file, is mid-write, never moving on to an
 *   unrelated file in that moment);
 * - each edit is a compare-and-swap (`cas-file.ts`): read one version, build the chained config
 *   from it, and rename it in only if the file is still that version; otherwise read again. So a
 *   write the primary CNI makes while we work is never overwritten with its older content;
 * - whether anything needs doing is decided by content: the file must equal its own primary part
 *   with our entry chained in exactly once, last;
 * - what we chained from (the primary CNI's own bytes) and which files we chained into are kept
 *   in a small state file in the run dir (`install-cni-state.json`), so uninstall, in this process
 *   or a later one, puts back exactly those bytes (a lone `X.conf` we turned into `X.conflist`
 *   comes back as `X.conf`) and touches no file we did not chain into.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Secret } from '../../core/secret.js';
import { copyFileAtomic, removeStaleTemps, writeFileAtomic, type AtomicWriteOptions } from '../../ops/atomic-file.js';
import { readVersion, replaceIfUnchanged, unlinkIfUnchanged, type CasOptions, type CasResult, type FileVersion } from './cas-file.js';
import { chainPlugin, chainState, parseNetworkConfig, renderNetworkConfig, unchainPlugin } from './conflist.js';
import type { InstallConfig } from './config.js';
import { InstallError } from './errors.js';
import { isJsonObject, jsonEqual, type JsonObject, type JsonValue } from './json.js';
import { renderKubeconfig } from './kubeconfig.js';
import { buildPluginEntry } from './plugin-entry.js';
import { configSiblings, decidePrimary, hasCniConfigExtension, type ConfigDirEntry, type PrimaryDecision } from './primary-config.js';

const BINARY_MODE = 0o755;
const DEFAULT_CONFIG_MODE = 0o644;

export type ConfigOutcome =
  | { readonly state: 'waiting'; readonly reason: string }
  | { readonly state: 'unchanged'; readonly file: string }
  | { readonly state: 'written'; readonly file: string; readonly previous: 'missing' | 'outdated' }
  /** The file kept changing under us (every compare-and-swap lost): try again after the next change. */
  | { readonly state: 'busy'; readonly file: string; readonly reason: string };

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

/** The run-dir file that remembers which configs we chained into and what they held before. */
export const STATE_FILENAME = 'install-cni-state.json';
/** Reads and compare-and-swaps per pass before giving up until the next change. */
const MAX_CAS_ATTEMPTS = 6;

interface ChainRecord {
  /** The file the primary CNI wrote (differs from the key when a lone X.conf became X.conflist). */
  readonly from: string;
  /** Its bytes before our entry went in; null when unknown (it already held an istio-cni entry). */
  readonly original: string | null;
}

interface InstallState {
  /** The primary we chained into last (sticky while it is mid-write). */
  readonly primary?: string;
  /** Every config file we chained into, by name. */
  readonly chained: Readonly<Record<string, ChainRecord>>;
}

const EMPTY_STATE: InstallState = { chained: {} };

function parseState(text: string | undefined): InstallState {
  if (text === undefined) return EMPTY_STATE;
  try {
    const v: unknown = JSON.parse(text);
    if (!isJsonObject(v) || !isJsonObject(v.chained)) return EMPTY_STATE;
    const chained: Record<string, ChainRecord> = {};
    for (const [name, rec] of Object.entries(v.chained)) {
      if (!isJsonObject(rec) || typeof rec.from !== 'string' || !(typeof rec.original === 'string' || rec.original === null)) continue;
      chained[name] = { from: rec.from, original: rec.original };
    }
    return { ...(typeof v.primary === 'string' ? { primary: v.primary } : {}), chained };
  } catch {
    return EMPTY_STATE; // unreadable: start afresh (uninstall then falls back to removing our entry)
  }
}

/** The parsed network config, or undefined when `text` is not one (empty, half written, garbage). */
function tryParse(text: string, name: string): unknown {
  try {
    return parseNetworkConfig(text, { source: name }).value;
  } catch {
    return undefined;
  }
}

/** The config without any istio-cni entry, or null when nothing else is left. */
function primaryPart(value: unknown): JsonValue | null {
  const out = unchainPlugin(value);
  if (out.kind === 'untouched') return value as JsonValue;
  return out.kind === 'updated' ? out.config : null;
}

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
  readonly #now: () => number;
  readonly #events: InstallerEvents;
  readonly #onCommit: CasOptions['onCommit'];
  #stateCache: InstallState | undefined;
  /** Files we stopped waiting for, with the text they had then (undefined: absent). */
  readonly #givenUp = new Map<string, string | undefined>();
  /** The file the primary decision is waiting on, and since when. */
  #holding: { readonly name: string; readonly text: string | undefined; readonly since: number } | undefined;

  constructor(config: InstallConfig, options: InstallerOptions = {}) {
    this.#cfg = config;
    this.#now = options.now ?? Date.now;
    this.#events = options.events ?? {};
    this.#onCommit = options.onCommit;
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

  get #statePath(): string {
    return join(this.#cfg.mountedCniAgentRunDir, STATE_FILENAME);
  }

  #state(): InstallState {
    this.#stateCache ??= parseState(readTextSync(this.#statePath));
    return this.#stateCache;
  }

  async #saveState(next: InstallState): Promise<void> {
    if (JSON.stringify(next) === JSON.stringify(this.#state())) return;
    await mkdir(this.#cfg.mountedCniAgentRunDir, { recursive: true });
    // Not fsynced: it is a record for uninstall, and losing it in a crash only means uninstall
    // removes our entry without restoring the primary CNI's exact bytes.
    await writeFileAtomic(this.#statePath, JSON.stringify(next, null, 2) + '\n', { mode: 0o600 });
    this.#stateCache = next;
  }

  /** Remembers that `file` holds our entry, chained from `from` whose own bytes were `original`. */
  async #noteChained(file: string, record: ChainRecord): Promise<void> {
    const state = this.#state();
    const chained = { ...state.chained, [file]: record };
    if (record.from !== file) delete chained[record.from];
    await this.#saveState({ primary: file, chained });
  }

  /**
   * The primary CNI's own bytes behind `value` (the config we are about to chain, read as
   * `text` from `from`): the text itself when it holds no istio-cni entry; else what we recorded
   * for `file` earlier if its primary part is still the same; else unknown.
   */
  #originalOf(file: string, from: string, text: string, value: unknown): ChainRecord {
    if (unchainPlugin(value).kind === 'untouched') return { from, original: text };
    const known = this.#state().chained[file];
    if (known?.original != null && this.#samePrimaryPart(known.original, value)) return known;
    return { from: known?.from ?? from, original: null };
  }

  /** Whether `value`'s primary part is what chaining `original` gives (so `original` is what to put back). */
  #samePrimaryPart(original: string, value: unknown): boolean {
    try {
      return jsonEqual(primaryPart(chainPlugin(JSON.parse(original), this.#entry)), primaryPart(value));
    } catch {
      return false;
    }
  }

  /** Names whose text matters to the primary decision (CNI configs, and a configured name). */
  #wants(name: string): boolean {
    return hasCniConfigExtension(name) || (this.#cfg.cniConfName !== undefined && configSiblings(this.#cfg.cniConfName).includes(name));
  }

  #dirEntriesSync(): ConfigDirEntry[] {
    let names: string[];
    try {
      names = readdirSync(this.#cfg.mountedCniNetDir);
    } catch {
      return [];
    }
    return names.filter((n) => this.#wants(n)).map((name) => ({ name, text: readTextSync(join(this.#cfg.mountedCniNetDir, name)) }));
  }

  async #dirEntries(): Promise<ConfigDirEntry[]> {
    let names: string[];
    try {
      names = await readdir(this.#cfg.mountedCniNetDir);
    } catch (err) {
      if (errno(err) === 'ENOENT') return [];
      throw err;
    }
    const wanted = names.filter((n) => this.#wants(n));
    return Promise.all(wanted.map(async (name) => ({ name, text: await readText(join(this.#cfg.mountedCniNetDir, name)) })));
  }

  #decideNow(entries: readonly ConfigDirEntry[]): PrimaryDecision {
    return decidePrimary(entries, {
      configuredName: this.#cfg.cniConfName,
      ownFileName: this.#cfg.istioOwnedCniConfig ? this.#cfg.istioOwnedCniConfFilename : undefined,
      previous: this.#state().primary,
      givenUp: this.#givenUp,
    });
  }

  /** `decidePrimary`, with the wait limit: a file waited on for PRIMARY_CONFIG_WAIT_SECONDS is given up. */
  #decide(entries: readonly ConfigDirEntry[]): PrimaryDecision {
    const present = new Map(entries.map((e) => [e.name, e.text] as const));
    for (const [name, text] of this.#givenUp) if (present.get(name) !== text) this.#givenUp.delete(name);
    for (;;) {
      const decision = this.#decideNow(entries);
      if (decision.kind === 'use' || decision.holdOn === undefined) {
        if (decision.kind === 'use') this.#holding = undefined;
        return decision;
      }
      const { name, text } = decision.holdOn;
      const now = this.#now();
      if (this.#holding?.name !== name || this.#holding.text !== text) this.#holding = { name, text, since: now };
      if (now - this.#holding.since < this.#cfg.primaryConfigWaitSeconds * 1000) return decision;
      this.#givenUp.set(name, text);
      this.#holding = undefined;
      this.#events.gaveUpWaiting?.(name, decision.reason);
    }
  }

  /** Chains our entry into the primary config (or writes our own file in istio-owned mode). */
  async ensureConfig(): Promise<ConfigOutcome> {
    const dir = this.#cfg.mountedCniNetDir;
    /** What another writer put into the inode our last rename replaced: its latest content. */
    let carried: string | undefined;
    let lastConflict = { file: '', reason: '' };
    const conflict = (file: string, reason: string) => {
      lastConflict = { file, reason };
      this.#events.conflict?.(file, reason);
    };
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const entries = await this.#dirEntries();
      const decision = this.#decide(entries);
      if (decision.kind === 'wait') return { state: 'waiting', reason: `${decision.reason} in ${dir}` };
      const name = decision.name;
      const base = await readVersion(join(dir, name));
      if (base === undefined) {
        conflict(name, `${name} vanished while read`);
        continue;
      }
      const onDisk = tryParse(base.text, name);
      if (onDisk === undefined) {
        conflict(name, `${name} changed while read`); // the decision saw it loadable: mid-write now
        continue;
      }
      // Normally the file as read; after a rename of ours that another writer wrote into (see
      // cas-file.ts), what it wrote, unless that was incomplete.
      const carriedValue = carried === undefined ? undefined : tryParse(carried, name);
      const source = carriedValue === undefined ? base.text : carried!;
      const value = carriedValue ?? onDisk;
      carried = undefined;
      if (this.#cfg.istioOwnedCniConfig) return this.#ensureOwnFile(name, value, entries, base.mode);

      const wanted = chainPlugin(value, this.#entry, name);
      const target = name.endsWith('.conf') ? `${name}list` : name;
      if (target === name && jsonEqual(onDisk as JsonValue, wanted)) {
        await this.#noteChained(name, this.#originalOf(name, name, base.text, value));
        return { state: 'unchanged', file: name };
      }
      const text = renderNetworkConfig(wanted);
      const cas = { mode: base.mode || DEFAULT_CONFIG_MODE, sync: true, onCommit: this.#onCommit };
      let result: CasResult;
      if (target === name) {
        result = await replaceIfUnchanged(join(dir, name), base, text, cas);
      } else {
        // A lone X.conf becomes X.conflist (X.conf would sort first): write the list, then remove
        // the .conf, each only while the .conf is still the version we read.
        const existing = await readVersion(join(dir, target));
        if (existing !== undefined && !this.#mayOverwrite(target, existing)) {
          return { state: 'waiting', reason: `${name} must become ${target} to chain into it, but ${target} exists and is not ours` };
        }
        result = await replaceIfUnchanged(join(dir, target), existing ?? 'absent', text, { ...cas, also: [{ path: join(dir, name), expected: base }] });
        if (result.kind === 'swapped') {
          await this.#noteChained(target, this.#originalOf(target, name, source, value));
          const removed = unlinkIfUnchanged(join(dir, name), base);
          if (removed.kind === 'conflict') {
            conflict(name, removed.reason);
            continue;
          }
        }
      }
      if (result.kind === 'conflict') {
        conflict(name, result.reason);
        continue;
      }
      if (target === name) await this.#noteChained(name, this.#originalOf(name, name, source, value));
      if (result.overwritten !== undefined && target === name) {
        conflict(name, `${name} was written into as we replaced it`);
        carried = result.overwritten;
        continue;
      }
      const state = chainState(value, this.#entry, name);
      return { state: 'written', file: target, previous: state === 'missing' ? 'missing' : 'outdated' };
    }
    return { state: 'busy', file: lastConflict.file, reason: lastConflict.reason };
  }

  /** A file we may overwrite when converting X.conf: one we chained into, or one holding an istio-cni entry. */
  #mayOverwrite(name: string, existing: FileVersion): boolean {
    if (this.#state().chained[name] !== undefined) return true;
    try {
      return unchainPlugin(JSON.parse(existing.text)).kind !== 'untouched';
    } catch {
      return false;
    }
  }

  /** istio-owned mode: our own file, the primary's contents plus our entry; the primary is only read. */
  async #ensureOwnFile(primary: string, primaryValue: unknown, entries: readonly ConfigDirEntry[], mode: number): Promise<ConfigOutcome> {
    const own = this.#cfg.istioOwnedCniConfFilename;
    const wanted = chainPlugin(primaryValue, this.#entry, primary);
    const currentText = entries.find((e) => e.name === own)?.text;
    await this.#saveState({ ...this.#state(), primary });
    let previous: 'missing' | 'outdated' = 'missing';
    if (currentText !== undefined) {
      previous = 'outdated';
      try {
        if (jsonEqual(JSON.parse(currentText) as JsonValue, wanted)) return { state: 'unchanged', file: own };
      } catch {
        // unparseable: rewrite
      }
    }
    await writeFileAtomic(join(this.#cfg.mountedCniNetDir, own), renderNetworkConfig(wanted), durable(mode || DEFAULT_CONFIG_MODE));
    return { state: 'written', file: own, previous };
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
    const decision = this.#decideNow(entries);
    if (decision.kind === 'wait') return `no primary CNI config: ${decision.reason} in ${this.#cfg.mountedCniNetDir}`;
    const primary = decision.name;
    const text = entries.find((e) => e.name === primary)?.text ?? '';
    try {
      const value: unknown = JSON.parse(text);
      if (this.#cfg.istioOwnedCniConfig) {
        const own = entries.find((e) => e.name === this.#cfg.istioOwnedCniConfFilename)?.text;
        if (own === undefined) return `${this.#cfg.istioOwnedCniConfFilename} is missing`;
        if (!jsonEqual(JSON.parse(own) as JsonValue, chainPlugin(value, this.#entry))) {
          return `${this.#cfg.istioOwnedCniConfFilename} is out of date`;
        }
        if (this.#cfg.istioOwnedCniConfFilename > primary) {
          return `${this.#cfg.istioOwnedCniConfFilename} sorts after the primary ${primary}; the runtime will not use it`;
        }
        return undefined;
      }
      // By content: the file must be its own primary part with our entry chained in once, last.
      if (jsonEqual(value as JsonValue, chainPlugin(value, this.#entry, primary))) return undefined;
      return `istio-cni entry ${chainState(value, this.#entry, primary)} in ${primary}`;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  }

  // ---- removal --------------------------------------------------------------------------

  /**
   * Takes our entry out of every config we chained into (and the current primary, should the
   * record be lost), putting back the primary CNI's own bytes where the file still is what we
   * made of them; then deletes the kubeconfig, the state file and the binaries. Files we did not
   * chain into are never touched.
   */
  async uninstall(): Promise<{ readonly config: string | undefined; readonly removed: readonly string[] }> {
    const dir = this.#cfg.mountedCniNetDir;
    let config: string | undefined;
    if (this.#cfg.istioOwnedCniConfig) {
      if (await removeIfPresent(join(dir, this.#cfg.istioOwnedCniConfFilename))) config = this.#cfg.istioOwnedCniConfFilename;
    } else {
      const state = this.#state();
      const files = new Set(Object.keys(state.chained));
      const decision = this.#decideNow(await this.#dirEntries());
      if (decision.kind === 'use') files.add(decision.name);
      for (const file of [...files].sort()) {
        if (await this.#unchainFile(file, state.chained[file])) config = file;
      }
    }
    const removed: string[] = [];
    if (await removeIfPresent(this.kubeconfigPath)) removed.push(this.#cfg.kubeconfigFilename);
    await removeIfPresent(this.#statePath);
    this.#stateCache = EMPTY_STATE;
    for (const name of this.#cfg.binaries) {
      if (await removeIfPresent(join(this.#cfg.mountedCniBinDir, name))) removed.push(name);
    }
    await this.removeStaleTemps();
    return { config, removed };
  }

  /** Removes our entry from `file` by compare-and-swap; returns whether it changed anything. */
  async #unchainFile(file: string, record: ChainRecord | undefined): Promise<boolean> {
    const dir = this.#cfg.mountedCniNetDir;
    const path = join(dir, file);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const current = await readVersion(path);
      if (current === undefined) return false;
      let value: unknown;
      let out;
      try {
        value = JSON.parse(current.text);
        out = unchainPlugin(value, file);
      } catch {
        return false; // not a config we can read, so not one to edit
      }
      if (out.kind === 'untouched') return false;
      const cas = { mode: current.mode || DEFAULT_CONFIG_MODE, sync: true, onCommit: this.#onCommit };
      let result: CasResult;
      const original = record?.original;
      if (original != null && record !== undefined && this.#samePrimaryPart(original, value)) {
        if (record.from === file) {
          result = await replaceIfUnchanged(path, current, original, cas);
        } else {
          // We turned record.from (X.conf) into this file: X.conf comes back, then this goes. If
          // an X.conf is there already (the primary CNI wrote it again), it stays as it is.
          const from = join(dir, record.from);
          const there = await readVersion(from);
          result = there !== undefined ? { kind: 'swapped' } : await replaceIfUnchanged(from, 'absent', original, { ...cas, also: [{ path, expected: current }] });
          if (result.kind === 'swapped') result = unlinkIfUnchanged(path, current);
        }
      } else if (out.kind === 'empty') {
        result = unlinkIfUnchanged(path, current);
      } else {
        result = await replaceIfUnchanged(path, current, renderNetworkConfig(out.config), cas);
      }
      if (result.kind === 'swapped') return true;
      this.#events.conflict?.(file, result.reason);
    }
    return false;
  }
}
