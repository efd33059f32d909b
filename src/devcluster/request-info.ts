/**
 * Turns a request path and method into what the API server's RequestInfo resolver produces:
 * resource or non-resource, verb, group/version/resource/subresource, namespace and name.
 * Authorization and the router both work from this.
 */
import { findResource, type ResourceType } from './resources.js';
import { badRequest, unknownPath } from './status.js';

export type ResourceRequest = {
  readonly kind: 'resource';
  readonly verb: string;
  readonly type: ResourceType;
  readonly subresource: string | undefined;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  /**
   * A list or watch whose fieldSelector requires `metadata.name=<name>`: the name RBAC sees (as
   * kube-apiserver's RequestInfoFactory sets it), so `resourceNames` rules can allow watching one object.
   */
  readonly selectedName?: string;
};

export type NonResourceRequest = {
  readonly kind: 'nonresource';
  readonly verb: string;
  readonly path: string;
};

export type RequestInfo = ResourceRequest | NonResourceRequest;

const HTTP_VERB: Record<string, string> = { GET: 'get', HEAD: 'get', POST: 'post', PUT: 'put', PATCH: 'patch', DELETE: 'delete' };

function isWatch(query: URLSearchParams): boolean {
  const w = query.get('watch');
  return w === '1' || w === 'true';
}

export function resolveRequest(method: string, path: string, query: URLSearchParams): RequestInfo {
  let segs: string[];
  try {
    segs = path.split('/').filter((s) => s !== '').map((s) => decodeURIComponent(s));
  } catch {
    throw badRequest(`malformed URL path ${JSON.stringify(path.slice(0, 200))}`);
  }
  let group: string;
  let version: string;
  let rest: string[];
  if (segs[0] === 'api' && segs.length >= 3) {
    group = '';
    version = segs[1]!;
    rest = segs.slice(2);
  } else if (segs[0] === 'apis' && segs.length >= 4) {
    group = segs[1]!;
    version = segs[2]!;
    rest = segs.slice(3);
  } else {
    return { kind: 'nonresource', verb: HTTP_VERB[method] ?? method.toLowerCase(), path };
  }
  let namespace: string | undefined;
  // /namespaces/{ns}/{resource}... addresses a namespaced resource; /namespaces/{name}[/status]
  // addresses the namespace object itself.
  if (rest[0] === 'namespaces' && rest.length >= 3 && findResource(group, version, rest[2]!)?.namespaced) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const type = findResource(group, version, rest[0]!);
  if (!type || rest.length > 3) throw unknownPath();
  if (!type.namespaced && namespace !== undefined) throw unknownPath();
  const name = rest[1];
  const subresource = rest[2];
  if (subresource !== undefined && !(type.subresources ?? []).includes(subresource)) throw unknownPath();
  let verb: string;
  switch (method) {
    case 'GET':
    case 'HEAD':
      verb = isWatch(query) ? 'watch' : name === undefined ? 'list' : 'get';
      break;
    case 'POST':
      verb = 'create';
      break;
    case 'PUT':
      verb = 'update';
      break;
    case 'PATCH':
      verb = 'patch';
      break;
    case 'DELETE':
      verb = name === undefined ? 'deletecollection' : 'delete';
      break;
    default:
      verb = method.toLowerCase();
  }
  const selectedName = (verb === 'list' || verb === 'watch') && name === undefined ? exactName(query.get('fieldSelector')) : undefined;
  return { kind: 'resource', verb, type, subresource, namespace, name, ...(selectedName !== undefined ? { selectedName } : {}) };
}

/** The name a field selector requires exactly (`metadata.name=x` or `==`, among other terms), if a valid path segment. */
function exactName(selector: string | null): string | undefined {
  if (!selector) return undefined;
  for (const term of selector.split(',')) {
    const m = /^\s*metadata\.name\s*==?\s*([^\s]*)\s*$/.exec(term);
    if (m && m[1] !== '' && m[1] !== '.' && m[1] !== '..' && !/[/%]/.test(m[1]!)) return m[1];
  }
  return undefined;
}
