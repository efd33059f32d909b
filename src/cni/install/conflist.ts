/**
 * The conflist editor: pure functions over JSON values that chain the istio-cni entry into a
 * node's CNI network config, take it out again, and check it is in place.
 *
 * A network config is either a single plugin (`.conf`: an object with `type`) or a list
 * (`.conflist`: an object with a non-empty `plugins` array). Chaining always yields a list:
 * - a list gets our entry appended as the last plugin; an earlier istio-cni entry anywhere in
 *   the list is removed first, so the entry never appears twice;
 * - a single plugin is wrapped into a list named `k8s-pod-network` (cniVersion 0.3.1, the
 *   plugin's own cniVersion dropped), followed by our entry — exactly what Istio writes.
 * The entry loses its `cniVersion` in either case: plugins inside a list inherit the list's.
 */
import { InstallError } from './errors.js';
import { cloneJson, isJsonObject, jsonEqual, type JsonObject, type JsonValue } from './json.js';
import { PLUGIN_TYPE } from './plugin-entry.js';

/** The list name and version Istio uses when it wraps a lone .conf into a .conflist. */
export const WRAPPED_LIST_NAME = 'k8s-pod-network';
export const WRAPPED_LIST_CNI_VERSION = '0.3.1';

export type NetworkConfig =
  | { readonly kind: 'single'; readonly value: JsonObject }
  | { readonly kind: 'list'; readonly value: JsonObject; readonly plugins: readonly JsonObject[] };

function invalid(source: string, why: string): InstallError {
  return new InstallError('ERR_CNI_CONFIG_INVALID', `CNI config ${source}: ${why}`);
}

/**
 * Classifies a parsed JSON value as a single plugin config or a list, refusing anything else
 * (`[]`, `{}`, a list without plugins, plugins without a `type`).
 */
export function classifyNetworkConfig(value: unknown, source = '(input)'): NetworkConfig {
  if (!isJsonObject(value)) {
    throw invalid(source, `must be a JSON object, got ${Array.isArray(value) ? 'an array' : typeof value}`);
  }
  if (Object.hasOwn(value, 'plugins')) {
    const plugins = value.plugins;
    if (!Array.isArray(plugins)) throw invalid(source, '"plugins" must be an array');
    if (plugins.length === 0) throw invalid(source, '"plugins" is empty');
    plugins.forEach((p, i) => {
      if (!isJsonObject(p)) throw invalid(source, `plugins[${i}] must be an object`);
      if (typeof p.type !== 'string' || p.type === '') throw invalid(source, `plugins[${i}] has no "type"`);
    });
    return { kind: 'list', value, plugins: plugins as JsonObject[] };
  }
  if (typeof value.type === 'string' && value.type !== '') return { kind: 'single', value };
  throw invalid(source, 'neither a plugin config (no "type") nor a config list (no "plugins")');
}

/**
 * Parses file text into a classified network config; a JSON syntax error is
 * ERR_CNI_CONFIG_INVALID. `source` names the file in error messages.
 */
export function parseNetworkConfig(text: string, options: { readonly source?: string } = {}): NetworkConfig {
  const source = options.source ?? '(input)';
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalid(source, `not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  return classifyNetworkConfig(value, source);
}

function isOurs(plugin: JsonValue): boolean {
  return isJsonObject(plugin) && plugin.type === PLUGIN_TYPE;
}

function listEntry(entry: JsonObject): JsonObject {
  if (entry.type !== PLUGIN_TYPE) {
    throw new InstallError('ERR_CNI_PLUGIN_ENTRY_INVALID', `plugin entry must have type ${PLUGIN_TYPE}`);
  }
  const copy = cloneJson(entry);
  delete copy.cniVersion;
  return copy;
}

/** Returns the config list with `entry` chained last (see the module comment for the rules). */
export function chainPlugin(existing: unknown, entry: JsonObject, source = '(input)'): JsonObject {
  const config = classifyNetworkConfig(existing, source);
  const ours = listEntry(entry);
  if (config.kind === 'single') {
    const primary = cloneJson(config.value);
    delete primary.cniVersion;
    return { cniVersion: WRAPPED_LIST_CNI_VERSION, name: WRAPPED_LIST_NAME, plugins: [primary, ours] };
  }
  const out = cloneJson(config.value);
  out.plugins = [...config.plugins.filter((p) => !isOurs(p)).map((p) => cloneJson(p)), ours];
  return out;
}

export type UnchainResult =
  /** Nothing of ours in the config: leave the file alone. */
  | { readonly kind: 'untouched' }
  /** Only our entry was in it: delete the file. */
  | { readonly kind: 'empty' }
  | { readonly kind: 'updated'; readonly config: JsonObject };

/** The config with every istio-cni entry removed. */
export function unchainPlugin(existing: unknown, source = '(input)'): UnchainResult {
  const config = classifyNetworkConfig(existing, source);
  if (config.kind === 'single') return isOurs(config.value) ? { kind: 'empty' } : { kind: 'untouched' };
  if (!config.plugins.some(isOurs)) return { kind: 'untouched' };
  const rest = config.plugins.filter((p) => !isOurs(p));
  if (rest.length === 0) return { kind: 'empty' };
  const out = cloneJson(config.value);
  out.plugins = rest.map((p) => cloneJson(p));
  return { kind: 'updated', config: out };
}

export type ChainState =
  /** Our entry is the last plugin and equals the wanted entry. */
  | 'installed'
  /** No istio-cni entry in the config. */
  | 'missing'
  /** An istio-cni entry exists but is stale, duplicated or not last. */
  | 'outdated';

/** How the wanted entry sits in `existing` (a valid config; invalid input throws). */
export function chainState(existing: unknown, entry: JsonObject, source = '(input)'): ChainState {
  const config = classifyNetworkConfig(existing, source);
  if (config.kind === 'single') return isOurs(config.value) ? 'outdated' : 'missing';
  const ours = config.plugins.filter(isOurs);
  if (ours.length === 0) return 'missing';
  const last = config.plugins[config.plugins.length - 1];
  if (ours.length === 1 && last !== undefined && jsonEqual(last, listEntry(entry))) return 'installed';
  return 'outdated';
}

/** Serialises a config the way we write it to disk: two-space indent, trailing newline. */
export function renderNetworkConfig(config: JsonObject): string {
  return JSON.stringify(config, null, 2) + '\n';
}
