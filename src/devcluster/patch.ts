/**
 * The three patch formats the API server takes: JSON merge patch (RFC 7386), strategic merge
 * patch (merge patch plus merge-by-key for the lists Kubernetes declares that way and the
 * `$patch`/`$retainKeys` directives we need), and JSON patch (RFC 6902). Bad patches are 400s /
 * 422s from the caller, never exceptions that escape.
 */
import { badRequest, ApiError } from './status.js';
import { canonicalJson } from './admission.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

function isObject(v: unknown): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function clone<T>(v: T): T {
  return structuredClone(v);
}

export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const out: JsonObject = isObject(target) ? clone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v) as Json;
  }
  return out;
}

/** List fields merged by key in strategic merge patch (field name -> merge key). */
const MERGE_KEYS: Readonly<Record<string, string>> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  volumes: 'name',
  env: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  ports: 'containerPort',
  conditions: 'type',
  containerStatuses: 'name',
  initContainerStatuses: 'name',
  podIPs: 'ip',
  hostIPs: 'ip',
  addresses: 'type',
  tolerations: 'key',
  imagePullSecrets: 'name',
  ownerReferences: 'uid',
  finalizers: '',
};

export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  if (patch.$patch === 'replace') {
    const { $patch: _drop, ...rest } = patch;
    return clone(rest);
  }
  if (patch.$patch === 'delete') return undefined;
  const out: JsonObject = isObject(target) ? clone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k === '$patch' || k === '$retainKeys' || k.startsWith('$setElementOrder/') || k.startsWith('$deleteFromPrimitiveList/')) continue;
    if (v === null) {
      delete out[k];
      continue;
    }
    const mergeKey = MERGE_KEYS[k];
    if (Array.isArray(v) && mergeKey !== undefined && Array.isArray(out[k])) {
      out[k] = mergeList(out[k] as Json[], v, mergeKey);
      continue;
    }
    const merged = strategicMergePatch(out[k], v);
    if (merged === undefined) delete out[k];
    else out[k] = merged as Json;
  }
  for (const [k, v] of Object.entries(patch)) {
    if (!k.startsWith('$deleteFromPrimitiveList/') || !Array.isArray(v)) continue;
    const field = k.slice('$deleteFromPrimitiveList/'.length);
    const cur = out[field];
    if (Array.isArray(cur)) out[field] = cur.filter((x) => !v.includes(x));
  }
  return out;
}

function mergeList(current: Json[], patch: Json[], key: string): Json[] {
  if (key === '') {
    // A set of primitives (finalizers): union, keeping order.
    const out = [...current];
    for (const p of patch) if (!out.includes(p)) out.push(p);
    return out;
  }
  if (patch.some((p) => isObject(p) && p.$patch === 'replace')) {
    return patch.filter((p) => !(isObject(p) && p.$patch === 'replace')).map(clone);
  }
  const out = current.map(clone);
  for (const p of patch) {
    if (!isObject(p) || !(key in p)) {
      out.push(clone(p));
      continue;
    }
    const idx = out.findIndex((c) => isObject(c) && c[key] === p[key]);
    if (p.$patch === 'delete') {
      if (idx >= 0) out.splice(idx, 1);
      continue;
    }
    if (idx >= 0) out[idx] = strategicMergePatch(out[idx], p) as Json;
    else out.push(strategicMergePatch({}, p) as Json);
  }
  return out;
}

interface JsonPatchOp {
  op: string;
  path: string;
  value?: unknown;
  from?: string;
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw badRequest(`json patch path ${JSON.stringify(path)} must start with "/"`);
  return path
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function unprocessable(message: string): ApiError {
  return new ApiError({ code: 'ERR_DEVCLUSTER_INVALID', httpCode: 422, reason: 'Invalid', message });
}

function locate(doc: unknown, segs: string[], op: string): { parent: unknown; key: string } {
  let cur = doc;
  for (const s of segs.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[Number(s)];
    else if (isObject(cur)) cur = cur[s];
    else cur = undefined;
    if (cur === undefined) throw unprocessable(`the server rejected our request due to an error in our request: ${op} operation does not apply: doc is missing path: /${segs.join('/')}`);
  }
  return { parent: cur, key: segs[segs.length - 1] ?? '' };
}

function getAt(doc: unknown, segs: string[], op: string): unknown {
  if (segs.length === 0) return doc;
  const { parent, key } = locate(doc, segs, op);
  const v = Array.isArray(parent) ? parent[Number(key)] : isObject(parent) ? parent[key] : undefined;
  if (v === undefined) throw unprocessable(`the server rejected our request due to an error in our request: ${op} operation does not apply: doc is missing key: /${segs.join('/')}`);
  return v;
}

function removeAt(doc: unknown, segs: string[], op: string): unknown {
  const { parent, key } = locate(doc, segs, op);
  if (Array.isArray(parent)) {
    const i = Number(key);
    if (!Number.isInteger(i) || i < 0 || i >= parent.length) throw unprocessable(`${op} operation does not apply: index out of range: /${segs.join('/')}`);
    return parent.splice(i, 1)[0];
  }
  if (isObject(parent) && key in parent) {
    const v = parent[key];
    delete parent[key];
    return v;
  }
  throw unprocessable(`the server rejected our request due to an error in our request: ${op} operation does not apply: doc is missing key: /${segs.join('/')}`);
}

function addAt(doc: unknown, segs: string[], value: unknown, replace: boolean, op: string): unknown {
  if (segs.length === 0) return clone(value);
  const { parent, key } = locate(doc, segs, op);
  if (Array.isArray(parent)) {
    const i = key === '-' ? parent.length : Number(key);
    if (!Number.isInteger(i) || i < 0 || i > parent.length) throw unprocessable(`${op} operation does not apply: index out of range: /${segs.join('/')}`);
    if (replace) parent[i] = clone(value) as Json;
    else parent.splice(i, 0, clone(value) as Json);
  } else if (isObject(parent)) {
    if (replace && !(key in parent)) throw unprocessable(`the server rejected our request due to an error in our request: replace operation does not apply: doc is missing key: /${segs.join('/')}`);
    parent[key] = clone(value) as Json;
  } else throw unprocessable(`${op} operation does not apply: /${segs.join('/')}`);
  return doc;
}

export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw badRequest('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  let doc = clone(target);
  for (const raw of ops) {
    if (!isObject(raw) || typeof raw.op !== 'string' || typeof raw.path !== 'string') {
      throw badRequest('the server rejected our request due to an error in our request: each JSON patch operation needs string "op" and "path"');
    }
    if (raw.from !== undefined && typeof raw.from !== 'string') {
      throw badRequest('the server rejected our request due to an error in our request: a JSON patch "from" must be a string');
    }
    const o: JsonPatchOp = { op: raw.op, path: raw.path, value: raw.value, ...(raw.from !== undefined ? { from: raw.from } : {}) };
    const segs = pointer(o.path);
    switch (o.op) {
      case 'add':
        doc = addAt(doc, segs, o.value, false, 'add');
        break;
      case 'replace':
        doc = addAt(doc, segs, o.value, true, 'replace');
        break;
      case 'remove':
        removeAt(doc, segs, 'remove');
        break;
      case 'move': {
        const v = removeAt(doc, pointer(o.from ?? ''), 'move');
        doc = addAt(doc, segs, v, false, 'move');
        break;
      }
      case 'copy':
        doc = addAt(doc, segs, getAt(doc, pointer(o.from ?? ''), 'copy'), false, 'copy');
        break;
      case 'test':
        if (canonicalJson(getAt(doc, segs, 'test')) !== canonicalJson(o.value)) {
          throw unprocessable(`the server rejected our request due to an error in our request: testing value /${segs.join('/')} failed: test failed`);
        }
        break;
      default:
        throw badRequest(`the server rejected our request due to an error in our request: unexpected json patch operation ${JSON.stringify(o.op)}`);
    }
  }
  return doc;
}
