/**
 * Our entry out of the CNI configs on uninstall: every config we chained into (and the current
 * primary, should the record be lost), by compare-and-swap, putting back the primary CNI's own
 * bytes where the file still is what we made of them. Files we did not chain into are never touched.
 */
import { join } from 'node:path';
import { readVersion, replaceIfUnchanged, unlinkIfUnchanged, type CasResult } from './cas-file.js';
import { MAX_CAS_ATTEMPTS, type ConfigParts } from './config-chainer.js';
import { renderNetworkConfig, unchainPlugin } from './conflist.js';
import { DEFAULT_CONFIG_MODE, removeIfPresent } from './host-fs.js';
import { samePrimaryPart, type ChainRecord } from './install-state.js';

export class ConfigUnchainer {
  readonly #p: ConfigParts;

  constructor(parts: ConfigParts) {
    this.#p = parts;
  }

  /** Takes our entry (or our own file) away; returns the last config file it changed. */
  async removeAll(): Promise<string | undefined> {
    const cfg = this.#p.config;
    const dir = cfg.mountedCniNetDir;
    if (cfg.istioOwnedCniConfig) {
      return (await removeIfPresent(join(dir, cfg.istioOwnedCniConfFilename))) ? cfg.istioOwnedCniConfFilename : undefined;
    }
    let config: string | undefined;
    const state = this.#p.state.current();
    const files = new Set(Object.keys(state.chained));
    const decision = this.#p.chooser.decideNow(await this.#p.chooser.entries());
    if (decision.kind === 'use') files.add(decision.name);
    for (const file of [...files].sort()) {
      if (await this.#unchainFile(file, state.chained[file])) config = file;
    }
    return config;
  }

  /** Removes our entry from `file` by compare-and-swap; returns whether it changed anything. */
  async #unchainFile(file: string, record: ChainRecord | undefined): Promise<boolean> {
    const dir = this.#p.config.mountedCniNetDir;
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
      const cas = { mode: current.mode || DEFAULT_CONFIG_MODE, sync: true, onCommit: this.#p.onCommit };
      let result: CasResult;
      const original = record?.original;
      if (original != null && record !== undefined && samePrimaryPart(original, value, this.#p.entry)) {
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
      this.#p.conflict(file, result.reason);
    }
    return false;
  }
}
