/**
 * Generic REST storage for every stored resource type: get, list (selectors, limit/continue),
 * create, update, patch (all four patch types), delete (preconditions, pod graceful deletion,
 * namespace cascade) and deletecollection, with dryRun. Kind-specific behaviour lives in
 * admission.ts; this file is only the verbs.
 */
import { stripTypeMeta, type ObjectStore, type KubeObject, type PageRequest, type StorePage } from './store.js';
import { apiVersionOf, findResource, RESOURCE_TYPES, type ResourceType } from './resources.js';
import { admitCreate, admitUpdate, isoSeconds, type CreateContext } from './admission.js';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.js';
import { jsonPatch, mergePatch, strategicMergePatch } from './patch.js';
import { alreadyExists, badRequest, conflict, expired, forbidden, notFound } from './status.js';
import { parse as parseYaml } from 'yaml';
import { PCR, admitPcrCreate, admitPcrUpdate } from './pcr-admission.js';
import type { UserInfo } from './authn.js';

const NAMESPACES = findResource('', 'v1', 'namespaces')!;
const SERVICE_ACCOUNTS = findResource('', 'v1', 'serviceaccounts')!;
const CONFIG_MAPS = findResource('', 'v1', 'configmaps')!;

export interface RestOptions {
  readonly store: ObjectStore;
  readonly now: () => number;
  /** Pods on a node get deletionTimestamp first and vanish a moment later (as the kubelet does). */
  readonly gracefulPodDeletion: () => boolean;
  /** PEM the kube-root-ca.crt ConfigMap of each namespace carries. */
  readonly rootCaPem: string;
  /** ServiceAccount admission: pods naming a missing service account are rejected (403). */
  readonly requireServiceAccounts?: boolean;
  /** Checks a caller may store this object (RBAC escalation prevention, ClusterTrustBundle attest; `prev` on update); throws a Status error. */
  readonly authorizeObject?: (t: ResourceType, obj: KubeObject, user: NonNullable<CreateContext['user']>, prev?: KubeObject) => void;
  /** RBAC `sign` for a signer name (PodCertificateRequest `/status`); default: nobody but the in-process admin. */
  readonly maySign?: (user: UserInfo, signerName: string) => boolean;
}

export interface Outcome {
  readonly code: number;
  readonly body: unknown;
}

/** A list answer whose items are JSON texts (http-io `sendJsonList` writes it). */
export interface JsonListOutcome {
  readonly code: number;
  /** The list without its items: kind, apiVersion, metadata. */
  readonly envelope: { kind: string; apiVersion: string; metadata: Record<string, unknown> };
  readonly items: string[];
}

function withTypeMeta(t: ResourceType, o: KubeObject): KubeObject {
  return { apiVersion: apiVersionOf(t), kind: t.kind, ...stripTypeMeta(o) } as KubeObject;
}

function isDryRun(q: URLSearchParams): boolean {
  return q.getAll('dryRun').includes('All');
}

export class RestStorage {
  readonly #o: RestOptions;

  constructor(options: RestOptions) {
    this.#o = options;
  }

  #pcrAdmission() {
    return { store: this.#o.store, nowMs: this.#o.now(), maySign: this.#o.maySign ?? (() => false) };
  }

  get(t: ResourceType, ns: string | undefined, name: string): Outcome {
    const o = this.#o.store.get(t, ns, name);
    if (!o) throw notFound(t.plural, t.group, name);
    return { code: 200, body: withTypeMeta(t, o) };
  }

  #filter(t: ResourceType, q: URLSearchParams): ((o: KubeObject) => boolean) | undefined {
    if (!q.get('labelSelector') && !q.get('fieldSelector')) return undefined;
    const labels = parseLabelSelector(q.get('labelSelector') ?? undefined);
    const fields = parseFieldSelector(q.get('fieldSelector') ?? undefined, t.fields ?? []);
    return (o) => matchesLabels(labels, o.metadata.labels) && matchesFields(fields, o);
  }

  #select(t: ResourceType, ns: string | undefined, q: URLSearchParams): KubeObject[] {
    const filter = this.#filter(t, q);
    return this.#o.store.page(t, ns, filter ? { filter } : {}).items;
  }

  /**
   * A list or one page of it. The continue token names the last key returned (as the API
   * server's does), so the next page starts right after it however many objects were created
   * or deleted meanwhile: nothing that existed throughout is skipped or repeated.
   */
  list(t: ResourceType, ns: string | undefined, q: URLSearchParams): Outcome {
    const { envelope, items } = this.#listPage(t, q, (req) => this.#o.store.page(t, ns, req));
    return { code: 200, body: { ...envelope, items: items.map(stripTypeMeta) } };
  }

  /** The same list as `list`, its items the store's cached JSON texts (no copy, no serialization). */
  listJson(t: ResourceType, ns: string | undefined, q: URLSearchParams): JsonListOutcome {
    const { envelope, items } = this.#listPage(t, q, (req) => this.#o.store.pageJson(t, ns, req));
    return { code: 200, envelope, items };
  }

  /** Checks the list parameters, reads the page they ask for and builds the list's envelope around it. */
  #listPage<T>(t: ResourceType, q: URLSearchParams, read: (req: PageRequest) => StorePage<T>): { envelope: JsonListOutcome['envelope']; items: T[] } {
    const rvMatch = q.get('resourceVersionMatch');
    const rv = q.get('resourceVersion');
    if (rvMatch === 'Exact' && rv && Number(rv) < this.#o.store.compactedResourceVersion) {
      throw expired(`too old resource version: ${rv} (${this.#o.store.compactedResourceVersion})`);
    }
    const filter = this.#filter(t, q);
    const metadata: Record<string, unknown> = { resourceVersion: String(this.#o.store.resourceVersion) };
    const cont = q.get('continue');
    let after: string | undefined;
    if (cont) {
      try {
        const parsed = JSON.parse(Buffer.from(cont, 'base64url').toString('utf8')) as { start?: unknown; rv?: unknown };
        if (typeof parsed.start !== 'string' || typeof parsed.rv !== 'number') throw new Error('bad');
        after = parsed.start;
        if (parsed.rv < this.#o.store.compactedResourceVersion) {
          throw expired('The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.');
        }
      } catch (err) {
        if (err instanceof Error && err.message === 'bad') throw badRequest('continue key is not valid: invalid continue token');
        if (err instanceof SyntaxError) throw badRequest('continue key is not valid: invalid continue token');
        throw err;
      }
    }
    const limit = Number(q.get('limit') ?? '0');
    const req: PageRequest = {
      ...(after !== undefined ? { after } : {}),
      ...(Number.isInteger(limit) && limit > 0 ? { limit } : {}),
      ...(filter ? { filter } : {}),
    };
    const page = read(req);
    if (page.next !== undefined) {
      metadata.continue = Buffer.from(JSON.stringify({ rv: this.#o.store.resourceVersion, start: page.next })).toString('base64url');
      if (page.remaining !== undefined) metadata.remainingItemCount = page.remaining;
    }
    return { envelope: { kind: `${t.kind}List`, apiVersion: apiVersionOf(t), metadata }, items: page.items };
  }

  create(t: ResourceType, ns: string | undefined, input: unknown, q: URLSearchParams, user?: CreateContext['user']): Outcome {
    if (t.namespaced && (ns === undefined || !this.#o.store.get(NAMESPACES, undefined, ns))) {
      throw notFound('namespaces', '', ns ?? '');
    }
    if (t.namespaced && ns !== undefined) {
      const nsObj = this.#o.store.get(NAMESPACES, undefined, ns);
      if (nsObj?.metadata.deletionTimestamp) throw badRequest(`unable to create new content in namespace ${ns} because it is being terminated`);
    }
    const obj = admitCreate(t, input, { nowMs: this.#o.now(), namespace: ns, ...(user ? { user } : {}) });
    if (t === PCR) admitPcrCreate(obj, user, this.#pcrAdmission());
    if (this.#o.requireServiceAccounts && t.group === '' && t.plural === 'pods') {
      const sa = String((obj.spec as { serviceAccountName?: string }).serviceAccountName);
      if (!this.#o.store.get(SERVICE_ACCOUNTS, ns, sa)) {
        throw forbidden(`pods "${obj.metadata.name}" is forbidden: error looking up service account ${ns}/${sa}: serviceaccount "${sa}" not found`, { name: obj.metadata.name!, kind: 'pods' });
      }
    }
    if (this.#o.store.get(t, ns, obj.metadata.name!)) throw alreadyExists(t.plural, t.group, obj.metadata.name!);
    if (user) this.#o.authorizeObject?.(t, obj, user);
    if (isDryRun(q)) return { code: 201, body: withTypeMeta(t, obj) };
    const stored = this.#o.store.create(t, obj);
    if (t === NAMESPACES) this.#seedNamespace(stored.metadata.name!);
    return { code: 201, body: withTypeMeta(t, stored) };
  }

  /** What the service-account and root-CA controllers add to every new namespace. */
  #seedNamespace(ns: string): void {
    const now = this.#o.now();
    if (!this.#o.store.get(SERVICE_ACCOUNTS, ns, 'default')) {
      this.#o.store.create(SERVICE_ACCOUNTS, admitCreate(SERVICE_ACCOUNTS, { metadata: { name: 'default' } }, { nowMs: now, namespace: ns }));
    }
    if (!this.#o.store.get(CONFIG_MAPS, ns, 'kube-root-ca.crt')) {
      this.#o.store.create(
        CONFIG_MAPS,
        admitCreate(CONFIG_MAPS, { metadata: { name: 'kube-root-ca.crt', annotations: { 'kubernetes.io/description': 'Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.' } }, data: { 'ca.crt': this.#o.rootCaPem } }, { nowMs: now, namespace: ns }),
      );
    }
  }

  update(t: ResourceType, ns: string | undefined, name: string, input: unknown, sub: string | undefined, q: URLSearchParams, user?: CreateContext['user']): Outcome {
    const current = this.#o.store.get(t, ns, name);
    if (!current) throw notFound(t.plural, t.group, name);
    const next = admitUpdate(t, current, input, { nameFromUrl: name, subresource: sub, nowMs: this.#o.now() });
    admitPcrUpdate(t, current, next, sub, user, this.#pcrAdmission());
    if (user) this.#o.authorizeObject?.(t, next, user, current);
    if (isDryRun(q)) return { code: 200, body: withTypeMeta(t, next) };
    const stored = this.#o.store.update(t, next);
    return { code: 200, body: withTypeMeta(t, stored) };
  }

  patch(t: ResourceType, ns: string | undefined, name: string, contentType: string, patch: unknown, sub: string | undefined, q: URLSearchParams, user?: CreateContext['user']): Outcome {
    const current = this.#o.store.get(t, ns, name);
    if (!current) {
      if (contentType === 'application/apply-patch+yaml' && sub === undefined) {
        if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) throw badRequest('an apply patch must be an object');
        return this.create(t, ns, { ...(patch as object), metadata: { ...((patch as KubeObject).metadata ?? {}), name } }, q, user);
      }
      throw notFound(t.plural, t.group, name);
    }
    const base = withTypeMeta(t, current);
    let result: unknown;
    switch (contentType) {
      case 'application/json-patch+json':
        result = jsonPatch(base, patch);
        break;
      case 'application/merge-patch+json':
      case 'application/apply-patch+yaml':
        if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) throw badRequest('a merge patch must be a JSON object');
        result = mergePatch(base, patch);
        break;
      default:
        if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) throw badRequest('a strategic merge patch must be a JSON object');
        result = strategicMergePatch(base, patch);
    }
    return this.update(t, ns, name, result, sub, q, user);
  }

  delete(t: ResourceType, ns: string | undefined, name: string, options: unknown, q: URLSearchParams): Outcome {
    const current = this.#o.store.get(t, ns, name);
    if (!current) throw notFound(t.plural, t.group, name);
    const opts = (options && typeof options === 'object' ? options : {}) as { preconditions?: { uid?: string; resourceVersion?: string }; gracePeriodSeconds?: number };
    const pre = opts.preconditions ?? {};
    if (pre.uid && pre.uid !== current.metadata.uid) {
      throw conflict(t.plural, t.group, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${current.metadata.uid}`);
    }
    if (pre.resourceVersion && pre.resourceVersion !== current.metadata.resourceVersion) {
      throw conflict(t.plural, t.group, name, `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${current.metadata.resourceVersion}`);
    }
    const grace = opts.gracePeriodSeconds ?? (q.get('gracePeriodSeconds') !== null ? Number(q.get('gracePeriodSeconds')) : undefined);
    if (isDryRun(q)) return { code: 200, body: withTypeMeta(t, current) };
    const isPod = t.group === '' && t.plural === 'pods';
    const spec = current.spec as { nodeName?: string } | undefined;
    if (isPod && grace !== 0 && spec?.nodeName && this.#o.gracefulPodDeletion()) {
      if (current.metadata.deletionTimestamp) return { code: 200, body: withTypeMeta(t, current) };
      current.metadata.deletionTimestamp = isoSeconds(this.#o.now());
      current.metadata.deletionGracePeriodSeconds = grace ?? 30;
      const marked = this.#o.store.update(t, current);
      // The simulated kubelet has nothing to stop: the pod goes away on the next turn.
      setImmediate(() => {
        const still = this.#o.store.get(t, ns, name);
        if (still && still.metadata.uid === marked.metadata.uid) this.#o.store.delete(t, ns, name);
      });
      return { code: 200, body: withTypeMeta(t, marked) };
    }
    if (t === NAMESPACES) {
      // As the namespace controller does, only without the wait: Terminating first (watchers see
      // it), then the contents, then the namespace. The answer is the Terminating namespace.
      current.metadata.deletionTimestamp = isoSeconds(this.#o.now());
      current.status = { ...((current.status as object | undefined) ?? {}), phase: 'Terminating' };
      const terminating = this.#o.store.update(t, current);
      this.#deleteNamespaceContents(name);
      this.#o.store.delete(t, ns, name);
      return { code: 200, body: withTypeMeta(t, terminating) };
    }
    const gone = this.#o.store.delete(t, ns, name)!;
    if (isPod || t === NAMESPACES || t.plural === 'services' || t.group === 'apps' || t.group === 'certificates.k8s.io') {
      return { code: 200, body: withTypeMeta(t, gone) };
    }
    return {
      code: 200,
      body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, ...(t.group ? { group: t.group } : {}), kind: t.plural, uid: gone.metadata.uid } },
    };
  }

  #deleteNamespaceContents(ns: string): void {
    for (const t of RESOURCE_TYPES) {
      if (!t.namespaced || t.virtual) continue;
      for (const o of this.#o.store.list(t, ns)) this.#o.store.delete(t, ns, o.metadata.name!);
    }
  }

  deleteCollection(t: ResourceType, ns: string | undefined, q: URLSearchParams): Outcome {
    const victims = this.#select(t, ns, q);
    if (!isDryRun(q)) for (const v of victims) this.#o.store.delete(t, v.metadata.namespace, v.metadata.name!);
    return { code: 200, body: { kind: `${t.kind}List`, apiVersion: apiVersionOf(t), metadata: { resourceVersion: String(this.#o.store.resourceVersion) }, items: victims.map(stripTypeMeta) } };
  }
}

/** Parses a YAML/JSON manifest stream (used by `apply` and the CLI's sample objects). */
export function parseManifest(text: string): unknown[] {
  return text
    .split(/^---\s*$/m)
    .map((doc) => parseYaml(doc) as unknown)
    .filter((d) => d !== null && d !== undefined);
}
