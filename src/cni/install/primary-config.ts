/**
 * Which file in the CNI config dir is the node's primary network config — the one the
 * container runtime uses, and so the one our plugin must be chained into.
 *
 * Runtimes (libcni) load the lexically first `.conf`/`.conflist` that parses as a valid
 * network config; we mirror that, skipping unparseable files and our own istio-owned file.
 * An operator may name the file instead (`CNI_CONF_NAME`); then the same name with the other
 * extension is accepted too, because chaining turns `X.conf` into `X.conflist`.
 *
 * `selectPrimaryConfig` is that rule alone, as Istio's install-cni applies it. `decidePrimary`
 * is what install-cni acts on: the same rule, except that it waits instead of moving on to a later
 * file when the lexically first one may just be in the middle of a write — the primary it chained
 * into last (`previous`) being absent or not loadable, or an earlier file being empty (a truncate
 * before the write). Picking the next valid file in that moment would edit a file that is not the
 * primary (a `99-loopback.conf`). How long to wait is the caller's: a file it gave up waiting on
 * (`givenUp`, with the text it had then) is treated as the runtime treats it.
 */
import { parseNetworkConfig } from './conflist.js';
import { PLUGIN_TYPE } from './plugin-entry.js';

export const CNI_CONFIG_EXTENSIONS: readonly string[] = ['.conf', '.conflist'];

export interface ConfigDirEntry {
  readonly name: string;
  /** File text, or undefined when it could not be read (a directory, a vanished file). */
  readonly text: string | undefined;
}

export interface PrimarySelectionOptions {
  /** An operator-chosen file name; when set, nothing else is considered. */
  readonly configuredName?: string | undefined;
  /** Our own file (istio-owned mode), never a candidate. */
  readonly ownFileName?: string | undefined;
}

export interface PrimarySelection {
  readonly name: string;
  /** Names skipped on the way because they did not parse, with the reason. */
  readonly skipped: ReadonlyArray<{ readonly name: string; readonly reason: string }>;
}

export function hasCniConfigExtension(name: string): boolean {
  return CNI_CONFIG_EXTENSIONS.some((ext) => name.endsWith(ext));
}

function byteOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Why a runtime would not load this file, or undefined when it would: the extension decides
 * the expected shape (a `.conflist` must be a named list, a `.conf` a single plugin).
 */
export function unloadableReason(file: { readonly name: string; readonly text: string }): string | undefined {
  const { name, text } = file;
  try {
    const config = parseNetworkConfig(text, { source: name });
    if (name.endsWith('.conflist')) {
      if (config.kind !== 'list') return `CNI config ${name}: a .conflist needs a "plugins" list`;
      if (typeof config.value.name !== 'string' || config.value.name === '') return `CNI config ${name}: the list has no "name"`;
    } else if (config.kind !== 'single') {
      return `CNI config ${name}: a .conf holds a single plugin, not a list`;
    }
    // A leftover standalone istio-cni config is not a network: chaining into it would only
    // duplicate us.
    const types = config.kind === 'list' ? config.plugins.map((p) => p.type) : [config.value.type];
    if (types.every((t) => t === PLUGIN_TYPE)) return `CNI config ${name}: holds only the ${PLUGIN_TYPE} plugin, not a primary network`;
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** `X.conf` and `X.conflist` are one config to us: chaining turns the first into the second. */
export function configSiblings(name: string): string[] {
  if (name.endsWith('.conf')) return [name, `${name}list`];
  if (name.endsWith('.conflist')) return [name.slice(0, -'list'.length), name];
  return [name];
}

/** The readable file an operator named (`CNI_CONF_NAME`): the name itself first, then its sibling. */
function configuredEntry(entries: readonly ConfigDirEntry[], wanted: string): ConfigDirEntry | undefined {
  const names = configSiblings(wanted).sort((a, b) => (a === wanted ? -1 : b === wanted ? 1 : 0));
  const byName = new Map(entries.map((e) => [e.name, e] as const));
  return names.map((n) => byName.get(n)).find((e) => e?.text !== undefined);
}

/** The `.conf`/`.conflist` files a runtime would try, in the order it tries them (bytewise by name), ours left out. */
function candidatesInLoadOrder(entries: readonly ConfigDirEntry[], ownFileName: string | undefined): ConfigDirEntry[] {
  return entries.filter((e) => hasCniConfigExtension(e.name) && e.name !== ownFileName).sort((a, b) => byteOrder(a.name, b.name));
}

/** Returns the primary config's file name, or undefined when there is none yet. */
export function selectPrimaryConfig(
  entries: readonly ConfigDirEntry[],
  options: PrimarySelectionOptions = {},
): PrimarySelection | undefined {
  if (options.configuredName !== undefined && options.configuredName !== '') {
    const found = configuredEntry(entries, options.configuredName);
    return found === undefined ? undefined : { name: found.name, skipped: [] };
  }
  const skipped: Array<{ name: string; reason: string }> = [];
  for (const entry of candidatesInLoadOrder(entries, options.ownFileName)) {
    if (entry.text === undefined) {
      skipped.push({ name: entry.name, reason: 'unreadable' });
      continue;
    }
    const reason = unloadableReason({ name: entry.name, text: entry.text });
    if (reason !== undefined) {
      skipped.push({ name: entry.name, reason });
      continue;
    }
    return { name: entry.name, skipped };
  }
  return undefined;
}

export interface PrimaryDecisionOptions extends PrimarySelectionOptions {
  /** The primary install-cni chained into last (either extension counts as the same file). */
  readonly previous?: string | undefined;
  /** Files the caller stopped waiting for: name -> the text they had then (undefined: absent). */
  readonly givenUp?: ReadonlyMap<string, string | undefined>;
}

export type PrimaryDecision =
  | { readonly kind: 'use'; readonly name: string; readonly skipped: PrimarySelection['skipped'] }
  | {
      readonly kind: 'wait';
      readonly reason: string;
      /** The file waited on, with its text now (undefined: absent); none when there is nothing else to use anyway. */
      readonly holdOn?: { readonly name: string; readonly text: string | undefined };
    };

function loadReason(text: string, name: string): string | undefined {
  try {
    parseNetworkConfig(text, { source: name });
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** The primary to chain into now, or why to wait (see the module comment). */
export function decidePrimary(entries: readonly ConfigDirEntry[], options: PrimaryDecisionOptions = {}): PrimaryDecision {
  const givenUp = (name: string, text: string | undefined) => options.givenUp?.has(name) === true && options.givenUp.get(name) === text;
  if (options.configuredName !== undefined && options.configuredName !== '') {
    const wanted = options.configuredName;
    const found = configuredEntry(entries, wanted);
    if (found === undefined) return { kind: 'wait', reason: `${wanted} not present` };
    const text = found.text!;
    if (text.trim() === '') return { kind: 'wait', reason: `${found.name} is empty (being written?)` };
    const reason = loadReason(text, found.name);
    if (reason !== undefined) return { kind: 'wait', reason: `${found.name} is not loadable (${reason}); waiting for the next write` };
    return { kind: 'use', name: found.name, skipped: [] };
  }
  const previous = options.previous === undefined || options.previous === '' ? [] : configSiblings(options.previous);
  const previousPresent = entries.some((e) => previous.includes(e.name) && e.text !== undefined);
  const skipped: Array<{ name: string; reason: string }> = [];
  for (const entry of candidatesInLoadOrder(entries, options.ownFileName)) {
    if (entry.text === undefined) {
      skipped.push({ name: entry.name, reason: 'unreadable' });
      continue;
    }
    const reason = unloadableReason({ name: entry.name, text: entry.text });
    if (reason === undefined) {
      const gone = options.previous;
      if (gone !== undefined && previous.length > 0 && !previousPresent && !givenUp(gone, undefined) && byteOrder(previous[0]!, entry.name) < 0) {
        return {
          kind: 'wait',
          reason: `the primary ${gone} is gone; waiting for it to be written again (not using ${entry.name})`,
          holdOn: { name: gone, text: undefined },
        };
      }
      return { kind: 'use', name: entry.name, skipped };
    }
    if (!givenUp(entry.name, entry.text)) {
      if (entry.text.trim() === '') {
        return { kind: 'wait', reason: `${entry.name} is empty (being written?)`, holdOn: { name: entry.name, text: entry.text } };
      }
      if (previous.includes(entry.name)) {
        return {
          kind: 'wait',
          reason: `the primary ${entry.name} is not loadable (${reason}); waiting for the next write`,
          holdOn: { name: entry.name, text: entry.text },
        };
      }
    }
    skipped.push({ name: entry.name, reason });
  }
  return { kind: 'wait', reason: 'no valid .conf/.conflist' };
}
