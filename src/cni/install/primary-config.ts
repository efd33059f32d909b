/**
 * Which file in the CNI config dir is the node's primary network config — the one the
 * container runtime uses, and so the one our plugin must be chained into.
 *
 * Runtimes (libcni) load the lexically first `.conf`/`.conflist` that parses as a valid
 * network config; we mirror that, skipping unparseable files and our own istio-owned file.
 * An operator may name the file instead (`CNI_CONF_NAME`); then the same name with the other
 * extension is accepted too, because chaining turns `X.conf` into `X.conflist`.
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

/** Returns the primary config's file name, or undefined when there is none yet. */
export function selectPrimaryConfig(
  entries: readonly ConfigDirEntry[],
  options: PrimarySelectionOptions = {},
): PrimarySelection | undefined {
  const byName = new Map(entries.map((e) => [e.name, e] as const));
  if (options.configuredName !== undefined && options.configuredName !== '') {
    const wanted = options.configuredName;
    const alternates = [wanted];
    if (wanted.endsWith('.conf')) alternates.push(`${wanted}list`);
    else if (wanted.endsWith('.conflist')) alternates.push(wanted.slice(0, -'list'.length));
    const found = alternates.find((n) => byName.get(n)?.text !== undefined);
    return found === undefined ? undefined : { name: found, skipped: [] };
  }
  const skipped: Array<{ name: string; reason: string }> = [];
  const candidates = entries
    .filter((e) => hasCniConfigExtension(e.name) && e.name !== options.ownFileName)
    .sort((a, b) => byteOrder(a.name, b.name));
  for (const entry of candidates) {
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
