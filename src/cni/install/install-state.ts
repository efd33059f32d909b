/**
 * The run-dir record of what install-cni chained (`install-cni-state.json`): which config files
 * hold our entry, what each held before (the primary CNI's own bytes), and the primary we chained
 * into last. Uninstall, in this process or a later one, puts back exactly those bytes and touches
 * no file we did not chain into.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../../ops/atomic-file.js';
import { chainPlugin, parseNetworkConfig, unchainPlugin } from './conflist.js';
import { readTextSync } from './host-fs.js';
import { isJsonObject, jsonEqual, type JsonObject, type JsonValue } from './json.js';

/** The run-dir file that remembers which configs we chained into and what they held before. */
export const STATE_FILENAME = 'install-cni-state.json';

export interface ChainRecord {
  /** The file the primary CNI wrote (differs from the key when a lone X.conf became X.conflist). */
  readonly from: string;
  /** Its bytes before our entry went in; null when unknown (it already held an istio-cni entry). */
  readonly original: string | null;
}

export interface InstallState {
  /** The primary we chained into last (sticky while it is mid-write). */
  readonly primary?: string;
  /** Every config file we chained into, by name. */
  readonly chained: Readonly<Record<string, ChainRecord>>;
}

export const EMPTY_STATE: InstallState = { chained: {} };

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
export function tryParseConfig(text: string, name: string): unknown {
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

/** Whether `value`'s primary part is what chaining `original` gives (so `original` is what to put back). */
export function samePrimaryPart(original: string, value: unknown, entry: JsonObject): boolean {
  try {
    return jsonEqual(primaryPart(chainPlugin(JSON.parse(original), entry)), primaryPart(value));
  } catch {
    return false;
  }
}

/** The state file in the run dir, read once and then kept in memory. */
export class InstallStateFile {
  readonly #runDir: string;
  #cache: InstallState | undefined;

  constructor(runDir: string) {
    this.#runDir = runDir;
  }

  get path(): string {
    return join(this.#runDir, STATE_FILENAME);
  }

  current(): InstallState {
    this.#cache ??= parseState(readTextSync(this.path));
    return this.#cache;
  }

  async save(next: InstallState): Promise<void> {
    if (JSON.stringify(next) === JSON.stringify(this.current())) return;
    await mkdir(this.#runDir, { recursive: true });
    // Not fsynced: it is a record for uninstall, and losing it in a crash only means uninstall
    // removes our entry without restoring the primary CNI's exact bytes.
    await writeFileAtomic(this.path, JSON.stringify(next, null, 2) + '\n', { mode: 0o600 });
    this.#cache = next;
  }

  /** Remembers that `file` holds our entry, chained from `from` whose own bytes were `original`. */
  async noteChained(file: string, record: ChainRecord): Promise<void> {
    const state = this.current();
    const chained = { ...state.chained, [file]: record };
    if (record.from !== file) delete chained[record.from];
    await this.save({ primary: file, chained });
  }

  /**
   * The primary CNI's own bytes behind `value` (the config we are about to chain, read as
   * `text` from `from`): the text itself when it holds no istio-cni entry; else what we recorded
   * for `file` earlier if its primary part is still the same; else unknown.
   */
  originalOf(file: string, from: string, text: string, value: unknown, entry: JsonObject): ChainRecord {
    if (unchainPlugin(value).kind === 'untouched') return { from, original: text };
    const known = this.current().chained[file];
    if (known?.original != null && samePrimaryPart(known.original, value, entry)) return known;
    return { from: known?.from ?? from, original: null };
  }

  /** Forgets everything (after uninstall removed the file). */
  reset(): void {
    this.#cache = EMPTY_STATE;
  }
}
