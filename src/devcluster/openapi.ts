/**
 * Just enough OpenAPI v3 for kubectl: `kubectl create -f` asks whether the server validates
 * fields itself (a `fieldValidation` query parameter on the resource's PATCH operation, found
 * by its x-kubernetes-group-version-kind); when it does, kubectl skips client-side schema
 * validation (which would need full schemas). No object schemas are published.
 */
import { RESOURCE_TYPES, type ResourceType } from './resources.js';
import { KUBE_VERSION } from './discovery.js';

function gvPath(t: ResourceType): string {
  return t.group === '' ? `api/${t.version}` : `apis/${t.group}/${t.version}`;
}

export function openApiV3Root(): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  for (const t of RESOURCE_TYPES) {
    const p = gvPath(t);
    paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=devcluster-${KUBE_VERSION.gitVersion}` };
  }
  return { paths };
}

const FIELD_VALIDATION = { name: 'fieldValidation', in: 'query', description: 'fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields.', schema: { type: 'string', uniqueItems: true } };

export function openApiV3Document(gv: string): Record<string, unknown> | undefined {
  const types = RESOURCE_TYPES.filter((t) => gvPath(t) === gv);
  if (types.length === 0) return undefined;
  const paths: Record<string, unknown> = {};
  for (const t of types) {
    const gvk = { group: t.group, version: t.version, kind: t.kind };
    const base = `/${gv}${t.namespaced ? '/namespaces/{namespace}' : ''}/${t.plural}`;
    const op = (action: string) => ({
      'x-kubernetes-action': action,
      'x-kubernetes-group-version-kind': gvk,
      parameters: [FIELD_VALIDATION, { name: 'dryRun', in: 'query', schema: { type: 'string' } }, { name: 'fieldManager', in: 'query', schema: { type: 'string' } }],
      responses: { '200': { description: 'OK' } },
    });
    // Create-only kinds (reviews) get a PATCH entry too: kubectl looks for fieldValidation there.
    paths[base] = { post: op('post') };
    paths[`${base}/{name}`] = { get: op('get'), put: op('put'), patch: op('patch'), delete: op('delete') };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: KUBE_VERSION.gitVersion }, paths, components: { schemas: {} } };
}

