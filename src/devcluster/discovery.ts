/**
 * Discovery documents in the legacy (unaggregated) format: /version, /api, /api/v1, /apis,
 * /apis/<group>, /apis/<group>/<version>. kubectl asks for aggregated discovery first and falls
 * back to these when the response is plain application/json.
 */
import { RESOURCE_TYPES, groups, type ResourceType } from './resources.js';

export const KUBE_VERSION = { major: '1', minor: '32', gitVersion: 'v1.32.0-devcluster' } as const;

export function versionInfo(): Record<string, string> {
  return {
    major: KUBE_VERSION.major,
    minor: KUBE_VERSION.minor,
    gitVersion: KUBE_VERSION.gitVersion,
    gitCommit: '0000000000000000000000000000000000000000',
    gitTreeState: 'clean',
    buildDate: '2026-01-01T00:00:00Z',
    goVersion: 'go1.23.0',
    compiler: 'gc',
    platform: 'linux/amd64',
  };
}

export function apiVersions(serverAddress: string): Record<string, unknown> {
  return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }] };
}

function groupEntry(name: string): Record<string, unknown> {
  const versions = [...new Set(RESOURCE_TYPES.filter((t) => t.group === name).map((t) => t.version))];
  const gvs = versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
  return { name, versions: gvs, preferredVersion: gvs[0] };
}

export function apiGroupList(): Record<string, unknown> {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: groups().map(groupEntry) };
}

export function apiGroup(name: string): Record<string, unknown> | undefined {
  if (!groups().includes(name)) return undefined;
  return { kind: 'APIGroup', apiVersion: 'v1', ...groupEntry(name) };
}

const SUBRESOURCE_VERBS: Record<string, readonly string[]> = {
  status: ['get', 'patch', 'update'],
  approval: ['get', 'patch', 'update'],
  token: ['create'],
};

const SUBRESOURCE_KIND: Record<string, string> = { token: 'TokenRequest' };

function resourceEntries(t: ResourceType): Record<string, unknown>[] {
  const main: Record<string, unknown> = {
    name: t.plural,
    singularName: t.singular,
    namespaced: t.namespaced,
    kind: t.kind,
    verbs: [...t.verbs],
    ...(t.shortNames ? { shortNames: [...t.shortNames] } : {}),
    ...(t.plural === 'pods' ? { categories: ['all'] } : {}),
  };
  const subs = (t.subresources ?? []).map((s) => ({
    name: `${t.plural}/${s}`,
    singularName: '',
    namespaced: t.namespaced,
    ...(s === 'token' ? { group: 'authentication.k8s.io', version: 'v1' } : {}),
    kind: SUBRESOURCE_KIND[s] ?? t.kind,
    verbs: [...(SUBRESOURCE_VERBS[s] ?? [])],
  }));
  return [main, ...subs];
}

export function apiResourceList(group: string, version: string): Record<string, unknown> | undefined {
  const types = RESOURCE_TYPES.filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  return {
    kind: 'APIResourceList',
    ...(group === '' ? {} : { apiVersion: 'v1' }),
    groupVersion: group === '' ? version : `${group}/${version}`,
    resources: types.flatMap(resourceEntries),
  };
}
