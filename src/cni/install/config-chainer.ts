/**
 * Our entry in the primary CNI config, put in by compare-and-swap (`cas-file.ts`): read one
 * version, build the chained config from it, and rename it in only if the file is still that
 * version; otherwise read again. So a write the primary CNI makes while we work is never
 * overwritten with its older content. Whether anything needs doing is decided by content: the
 * file must equal its own primary part with our entry chained in exactly once, last. In
 * istio-owned mode the primary is only read and our own file carries its contents plus our entry.
 */
import { join } from 'node:path';
import { writeFileAtomic } from '../../ops/atomic-file.js';
import { readVersion, replaceIfUnchanged, unlinkIfUnchanged, type CasOptions, type CasResult, type FileVersion } from './cas-file.js';
import { chainPlugin, chainState, renderNetworkConfig, unchainPlugin } from './conflist.js';
import type { InstallConfig } from './config.js';
import { DEFAULT_CONFIG_MODE, durable } from './host-fs.js';
import type { InstallStateFile } from './install-state.js';
import { tryParseConfig } from './install-state.js';
import { jsonEqual, type JsonObject, type JsonValue } from './json.js';
import type { PrimaryChooser } from './primary-chooser.js';
import type { ConfigDirEntry } from './primary-config.js';

export type ConfigOutcome =
  | { readonly state: 'waiting'; readonly reason: string }
  | { readonly state: 'unchanged'; readonly file: string }
  | { readonly state: 'written'; readonly file: string; readonly previous: 'missing' | 'outdated' }
  /** The file kept changing under us (every compare-and-swap lost): try again after the next change. */
  | { readonly state: 'busy'; readonly file: string; readonly reason: string };

/** Reads and compare-and-swaps per pass before giving up until the next change. */
export const MAX_CAS_ATTEMPTS = 6;

type ChainerConfig = Pick<InstallConfig, 'mountedCniNetDir' | 'istioOwnedCniConfig' | 'istioOwnedCniConfFilename'>;

/** What the config chainer and unchainer share. */
export interface ConfigParts {
  readonly config: ChainerConfig;
  readonly entry: JsonObject;
  readonly state: InstallStateFile;
  readonly chooser: PrimaryChooser;
  /** A compare-and-swap found the file changed since it was read: nothing was written over it. */
  readonly conflict: (file: string, reason: string) => void;
  readonly onCommit: CasOptions['onCommit'];
}

export class ConfigChainer {
  readonly #p: ConfigParts;

  constructor(parts: ConfigParts) {
    this.#p = parts;
  }

  /** Chains our entry into the primary config (or writes our own file in istio-owned mode). */
  async ensure(): Promise<ConfigOutcome> {
    const { config: cfg, entry, state: stateFile } = this.#p;
    const dir = cfg.mountedCniNetDir;
    /** What another writer put into the inode our last rename replaced: its latest content. */
    let carried: string | undefined;
    let lastConflict = { file: '', reason: '' };
    const conflict = (file: string, reason: string) => {
      lastConflict = { file, reason };
      this.#p.conflict(file, reason);
    };
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const entries = await this.#p.chooser.entries();
      const decision = this.#p.chooser.decide(entries);
      if (decision.kind === 'wait') return { state: 'waiting', reason: `${decision.reason} in ${dir}` };
      const name = decision.name;
      const base = await readVersion(join(dir, name));
      if (base === undefined) {
        conflict(name, `${name} vanished while read`);
        continue;
      }
      const onDisk = tryParseConfig(base.text, name);
      if (onDisk === undefined) {
        conflict(name, `${name} changed while read`); // the decision saw it loadable: mid-write now
        continue;
      }
      // Normally the file as read; after a rename of ours that another writer wrote into (see
      // cas-file.ts), what it wrote, unless that was incomplete.
      const carriedValue = carried === undefined ? undefined : tryParseConfig(carried, name);
      const source = carriedValue === undefined ? base.text : carried!;
      const value = carriedValue ?? onDisk;
      carried = undefined;
      if (cfg.istioOwnedCniConfig) return this.#ensureOwnFile(name, value, entries, base.mode);

      const wanted = chainPlugin(value, entry, name);
      const target = name.endsWith('.conf') ? `${name}list` : name;
      if (target === name && jsonEqual(onDisk as JsonValue, wanted)) {
        await stateFile.noteChained(name, stateFile.originalOf(name, name, base.text, value, entry));
        return { state: 'unchanged', file: name };
      }
      const text = renderNetworkConfig(wanted);
      const cas = { mode: base.mode || DEFAULT_CONFIG_MODE, sync: true, onCommit: this.#p.onCommit };
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
          await stateFile.noteChained(target, stateFile.originalOf(target, name, source, value, entry));
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
      if (target === name) await stateFile.noteChained(name, stateFile.originalOf(name, name, source, value, entry));
      if (result.overwritten !== undefined && target === name) {
        conflict(name, `${name} was written into as we replaced it`);
        carried = result.overwritten;
        continue;
      }
      const state = chainState(value, entry, name);
      return { state: 'written', file: target, previous: state === 'missing' ? 'missing' : 'outdated' };
    }
    return { state: 'busy', file: lastConflict.file, reason: lastConflict.reason };
  }

  /** Synchronous check for /readyz: undefined when the chained (or own) config is in place, else why not. */
  problem(): string | undefined {
    const { config: cfg, entry } = this.#p;
    const entries = this.#p.chooser.entriesSync();
    const decision = this.#p.chooser.decideNow(entries);
    if (decision.kind === 'wait') return `no primary CNI config: ${decision.reason} in ${cfg.mountedCniNetDir}`;
    const primary = decision.name;
    const text = entries.find((e) => e.name === primary)?.text ?? '';
    try {
      const value: unknown = JSON.parse(text);
      if (cfg.istioOwnedCniConfig) {
        const own = entries.find((e) => e.name === cfg.istioOwnedCniConfFilename)?.text;
        if (own === undefined) return `${cfg.istioOwnedCniConfFilename} is missing`;
        if (!jsonEqual(JSON.parse(own) as JsonValue, chainPlugin(value, entry))) {
          return `${cfg.istioOwnedCniConfFilename} is out of date`;
        }
        if (cfg.istioOwnedCniConfFilename > primary) {
          return `${cfg.istioOwnedCniConfFilename} sorts after the primary ${primary}; the runtime will not use it`;
        }
        return undefined;
      }
      // By content: the file must be its own primary part with our entry chained in once, last.
      if (jsonEqual(value as JsonValue, chainPlugin(value, entry, primary))) return undefined;
      return `istio-cni entry ${chainState(value, entry, primary)} in ${primary}`;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  }

  /** A file we may overwrite when converting X.conf: one we chained into, or one holding an istio-cni entry. */
  #mayOverwrite(name: string, existing: FileVersion): boolean {
    if (this.#p.state.current().chained[name] !== undefined) return true;
    try {
      return unchainPlugin(JSON.parse(existing.text)).kind !== 'untouched';
    } catch {
      return false;
    }
  }

  /** istio-owned mode: our own file, the primary's contents plus our entry; the primary is only read. */
  async #ensureOwnFile(primary: string, primaryValue: unknown, entries: readonly ConfigDirEntry[], mode: number): Promise<ConfigOutcome> {
    const { config: cfg, state } = this.#p;
    const own = cfg.istioOwnedCniConfFilename;
    const wanted = chainPlugin(primaryValue, this.#p.entry, primary);
    const currentText = entries.find((e) => e.name === own)?.text;
    await state.save({ ...state.current(), primary });
    let previous: 'missing' | 'outdated' = 'missing';
    if (currentText !== undefined) {
      previous = 'outdated';
      try {
        if (jsonEqual(JSON.parse(currentText) as JsonValue, wanted)) return { state: 'unchanged', file: own };
      } catch {
        // unparseable: rewrite
      }
    }
    await writeFileAtomic(join(cfg.mountedCniNetDir, own), renderNetworkConfig(wanted), durable(mode || DEFAULT_CONFIG_MODE));
    return { state: 'written', file: own, previous };
  }
}
