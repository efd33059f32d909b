/**
 * Which config in the CNI net dir is the primary, with the wait limit: `decidePrimary` waits
 * while a file is mid-write (see primary-config.ts); a file waited on for
 * PRIMARY_CONFIG_WAIT_SECONDS unchanged is given up and the next valid file is used.
 */
import { readdirSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { InstallConfig } from './config.js';
import { errno, readText, readTextSync } from './host-fs.js';
import { configSiblings, decidePrimary, hasCniConfigExtension, type ConfigDirEntry, type PrimaryDecision } from './primary-config.js';

type ChooserConfig = Pick<
  InstallConfig,
  'mountedCniNetDir' | 'cniConfName' | 'istioOwnedCniConfig' | 'istioOwnedCniConfFilename' | 'primaryConfigWaitSeconds'
>;

export interface PrimaryChooserOptions {
  /** Clock reading for the wait limit (ms). */
  readonly now: () => number;
  /** The primary we chained into last (sticky while it is mid-write). */
  readonly previous: () => string | undefined;
  /** The primary stayed absent/empty/unloadable past the wait limit: the next valid file is used. */
  readonly gaveUpWaiting?: (file: string, reason: string) => void;
}

export class PrimaryChooser {
  readonly #cfg: ChooserConfig;
  readonly #options: PrimaryChooserOptions;
  /** Files we stopped waiting for, with the text they had then (undefined: absent). */
  readonly #givenUp = new Map<string, string | undefined>();
  /** The file the primary decision is waiting on, and since when. */
  #holding: { readonly name: string; readonly text: string | undefined; readonly since: number } | undefined;

  constructor(config: ChooserConfig, options: PrimaryChooserOptions) {
    this.#cfg = config;
    this.#options = options;
  }

  /** The entries of the net dir whose text matters to the decision. */
  async entries(): Promise<ConfigDirEntry[]> {
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

  /** `entries()`, synchronously (for /readyz); an unreadable dir has none. */
  entriesSync(): ConfigDirEntry[] {
    let names: string[];
    try {
      names = readdirSync(this.#cfg.mountedCniNetDir);
    } catch {
      return [];
    }
    return names.filter((n) => this.#wants(n)).map((name) => ({ name, text: readTextSync(join(this.#cfg.mountedCniNetDir, name)) }));
  }

  /** The decision on these entries as things stand, without moving the wait limit. */
  decideNow(entries: readonly ConfigDirEntry[]): PrimaryDecision {
    return decidePrimary(entries, {
      configuredName: this.#cfg.cniConfName,
      ownFileName: this.#cfg.istioOwnedCniConfig ? this.#cfg.istioOwnedCniConfFilename : undefined,
      previous: this.#options.previous(),
      givenUp: this.#givenUp,
    });
  }

  /** `decideNow`, with the wait limit: a file waited on for PRIMARY_CONFIG_WAIT_SECONDS is given up. */
  decide(entries: readonly ConfigDirEntry[]): PrimaryDecision {
    const present = new Map(entries.map((e) => [e.name, e.text] as const));
    for (const [name, text] of this.#givenUp) if (present.get(name) !== text) this.#givenUp.delete(name);
    for (;;) {
      const decision = this.decideNow(entries);
      if (decision.kind === 'use' || decision.holdOn === undefined) {
        if (decision.kind === 'use') this.#holding = undefined;
        return decision;
      }
      const { name, text } = decision.holdOn;
      const now = this.#options.now();
      if (this.#holding?.name !== name || this.#holding.text !== text) this.#holding = { name, text, since: now };
      if (now - this.#holding.since < this.#cfg.primaryConfigWaitSeconds * 1000) return decision;
      this.#givenUp.set(name, text);
      this.#holding = undefined;
      this.#options.gaveUpWaiting?.(name, decision.reason);
    }
  }

  /** Names whose text matters to the primary decision (CNI configs, and a configured name). */
  #wants(name: string): boolean {
    return hasCniConfigExtension(name) || (this.#cfg.cniConfName !== undefined && configSiblings(this.#cfg.cniConfName).includes(name));
  }
}
