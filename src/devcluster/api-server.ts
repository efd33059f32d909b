/**
 * The request pipeline: faults -> authentication (bearer token, impersonation) -> request info
 * -> RBAC authorization -> the handler. Every failure becomes a Status; an unexpected exception
 * is logged (without request bodies or tokens) and answered as a generic 500, never a crash.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../core/log.js';
import type { ObjectStore, KubeObject } from './store.js';
import { ApiError, badRequest, forbidden, methodNotAllowed, unauthorized, unknownPath, internalError } from './status.js';
import { resolveRequest, type RequestInfo } from './request-info.js';
import { decodeBody, mediaType, readBody, sendError, sendJson, sendJsonList, BODY_TYPES, PATCH_TYPES } from './http-io.js';
import { apiGroup, apiGroupList, apiResourceList, apiVersions, versionInfo } from './discovery.js';
import { serviceAccountUser, type Authenticator, type UserInfo } from './authn.js';
import { forbiddenMessage, isAuthorizedForSignerName, type Attributes, type RbacAuthorizer } from './rbac.js';
import type { RestStorage } from './rest.js';
import type { Reviews } from './reviews.js';
import type { TokenIssuer } from './tokens.js';
import type { FaultInjector } from './faults.js';
import { applyFaultRequest } from './faults-endpoint.js';
import { openApiV3Document, openApiV3Root } from './openapi.js';
import { includeObjectParam, toTable, wantsTable } from './tables.js';
import { serveWatch, type WatchHub } from './watch.js';
import type { RequestLog } from './request-log.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';

export interface ApiServerParts {
  readonly store: ObjectStore;
  readonly authn: Authenticator;
  readonly rbac: RbacAuthorizer;
  readonly rest: RestStorage;
  readonly reviews: Reviews;
  readonly issuer: TokenIssuer;
  readonly faults: FaultInjector;
  readonly hub: WatchHub;
  readonly requestLog: RequestLog;
  readonly logger: Logger;
  readonly maxBodyBytes: number;
  readonly now: () => number;
  /** host:port as clients reach us, for /api serverAddressByClientCIDRs. */
  readonly serverAddress: () => string;
  readonly publicUrl: () => string;
}

const ANONYMOUS: UserInfo = { username: 'system:anonymous', groups: ['system:unauthenticated'] };

function bearer(req: IncomingMessage): string | undefined {
  const h = req.headers.authorization;
  if (h === undefined) return undefined;
  const m = /^Bearer\s+(.+)$/i.exec(h.trim());
  return m ? m[1]!.trim() : '';
}

export class ApiServer {
  readonly #p: ApiServerParts;

  constructor(parts: ApiServerParts) {
    this.#p = parts;
  }

  /** The node:http(s) request listener. */
  readonly listener = (req: IncomingMessage, res: ServerResponse): void => {
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    this.#handle(req, res).catch((err: unknown) => this.#fail(req, res, err));
  };

  #fail(req: IncomingMessage, res: ServerResponse, err: unknown): void {
    if (err instanceof ApiError) {
      sendError(res, err);
      this.#p.logger.debug('request failed', { method: req.method, path: (req.url ?? '').split('?')[0], code: err.httpCode, reason: err.reason });
      return;
    }
    this.#p.logger.error('unexpected error handling request', { method: req.method, path: (req.url ?? '').split('?')[0], err });
    sendError(res, internalError());
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://devcluster.invalid');
    const path = url.pathname;
    const q = url.searchParams;
    const method = req.method ?? 'GET';
    const watching = q.get('watch') === '1' || q.get('watch') === 'true';

    if (!path.startsWith('/devcluster/')) {
      this.#p.requestLog.record({ method, path, query: Object.fromEntries(q), watch: watching });
      const latency = this.#p.faults.latencyMs;
      if (latency > 0) await new Promise((r) => setTimeout(r, latency).unref());
      const injected = this.#p.faults.takeFailure({ method, path, watch: watching, query: q });
      if (injected) throw injected;
    }

    const user = await this.#authenticate(req);
    if (path.startsWith('/devcluster/')) {
      await this.#admin(req, res, user, path);
      return;
    }
    const info = resolveRequest(method, path, q);
    this.#authorize(user, info);
    if (info.kind === 'nonresource') {
      this.#nonResource(res, method, path);
      return;
    }
    await this.#resource(req, res, user, info, q);
  }

  async #authenticate(req: IncomingMessage): Promise<UserInfo> {
    const token = bearer(req);
    if (token === undefined) return ANONYMOUS;
    const r = await this.#p.authn.authenticate(token);
    if (!r.ok) throw unauthorized();
    return this.#impersonate(req, r.user);
  }

  /** `Impersonate-User`/`Impersonate-Group` (kubectl --as/--as-group), allowed by RBAC `impersonate`. */
  #impersonate(req: IncomingMessage, user: UserInfo): UserInfo {
    const as = req.headers['impersonate-user'];
    if (typeof as !== 'string' || as === '') return user;
    const rawGroups = req.headers['impersonate-group'];
    const asGroups = (Array.isArray(rawGroups) ? rawGroups : rawGroups ? [rawGroups] : []).flatMap((g) => g.split(',').map((s) => s.trim()));
    const sa = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(as);
    const check = (a: Omit<Attributes, 'user' | 'resourceRequest' | 'verb'>): void => {
      const attrs: Attributes = { user, resourceRequest: true, verb: 'impersonate', ...a };
      if (!this.#p.rbac.authorize(attrs).allowed) throw forbidden(forbiddenMessage(attrs), { name: a.name ?? '', kind: a.resource ?? '' });
    };
    if (sa) check({ apiGroup: '', resource: 'serviceaccounts', namespace: sa[1]!, name: sa[2]! });
    else check({ apiGroup: '', resource: 'users', name: as });
    for (const g of asGroups) check({ apiGroup: '', resource: 'groups', name: g });
    const base = sa ? serviceAccountUser(sa[1]!, sa[2]!) : { username: as, groups: ['system:authenticated'] };
    const groups = asGroups.length > 0 ? [...asGroups, ...(asGroups.includes('system:authenticated') ? [] : ['system:authenticated'])] : base.groups;
    return { username: base.username, groups };
  }

  #authorize(user: UserInfo, info: RequestInfo): void {
    const attrs: Attributes =
      info.kind === 'nonresource'
        ? { user, resourceRequest: false, verb: info.verb, path: info.path }
        : {
            user,
            resourceRequest: true,
            verb: info.verb,
            apiGroup: info.type.group,
            resource: info.type.plural,
            ...(info.subresource ? { subresource: info.subresource } : {}),
            ...(info.name ?? info.selectedName ? { name: info.name ?? info.selectedName } : {}),
            ...(info.namespace ? { namespace: info.namespace } : {}),
          };
    if (this.#p.rbac.authorize(attrs).allowed) return;
    if (user === ANONYMOUS) throw unauthorized();
    const details =
      info.kind === 'nonresource'
        ? {}
        : { ...(info.name ? { name: info.name } : {}), ...(info.type.group ? { group: info.type.group } : {}), kind: info.type.plural };
    throw forbidden(forbiddenMessage(attrs), details);
  }

  #nonResource(res: ServerResponse, method: string, path: string): void {
    if (method !== 'GET' && method !== 'HEAD') throw methodNotAllowed();
    const p = path.length > 1 ? path.replace(/\/$/, '') : path;
    if (p === '/version') return sendJson(res, 200, versionInfo());
    if (p === '/healthz' || p === '/livez' || p === '/readyz') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('ok');
      return;
    }
    if (p === '/.well-known/openid-configuration') return sendJson(res, 200, this.#p.issuer.openIdConfiguration(`${this.#p.publicUrl()}/openid/v1/jwks`));
    if (p === '/openid/v1/jwks') return sendJson(res, 200, this.#p.issuer.jwks(), { 'content-type': 'application/jwk-set+json' });
    if (p === '/api') return sendJson(res, 200, apiVersions(this.#p.serverAddress()));
    if (p === '/apis') return sendJson(res, 200, apiGroupList());
    if (p === '/openapi/v3') return sendJson(res, 200, openApiV3Root());
    if (p.startsWith('/openapi/v3/')) {
      const doc = openApiV3Document(p.slice('/openapi/v3/'.length));
      if (doc) return sendJson(res, 200, doc);
    }
    const core = /^\/api\/([^/]+)$/.exec(p);
    if (core) {
      const list = apiResourceList('', core[1]!);
      if (list) return sendJson(res, 200, list);
    }
    const grp = /^\/apis\/([^/]+)$/.exec(p);
    if (grp) {
      const g = apiGroup(grp[1]!);
      if (g) return sendJson(res, 200, g);
    }
    const gv = /^\/apis\/([^/]+)\/([^/]+)$/.exec(p);
    if (gv) {
      const list = apiResourceList(gv[1]!, gv[2]!);
      if (list) return sendJson(res, 200, list);
    }
    throw unknownPath();
  }

  async #body(req: IncomingMessage, accepted: readonly string[]): Promise<unknown> {
    const raw = await readBody(req, this.#p.maxBodyBytes);
    return decodeBody(mediaType(req), raw, accepted);
  }

  async #resource(req: IncomingMessage, res: ServerResponse, user: UserInfo, info: Extract<RequestInfo, { kind: 'resource' }>, q: URLSearchParams): Promise<void> {
    const { type: t, namespace: ns, name, subresource: sub, verb } = info;
    const { rest, reviews } = this.#p;
    if (t.virtual) return this.#review(req, res, user, info);
    if (sub === 'token') {
      if (verb !== 'create') throw methodNotAllowed();
      const body = await this.#body(req, BODY_TYPES);
      return sendJson(res, 201, await reviews.tokenRequest(ns!, name!, body));
    }
    if (!t.verbs.includes(verb) && !(sub && ['get', 'update', 'patch'].includes(verb))) throw methodNotAllowed();
    if ((verb === 'update' || verb === 'patch') && name === undefined) throw methodNotAllowed();
    switch (verb) {
      case 'get': {
        const r = rest.get(t, ns, name!);
        if (wantsTable(req)) return sendJson(res, r.code, toTable(t, [r.body as KubeObject], { nowMs: this.#p.now(), include: includeObjectParam(q) }));
        return sendJson(res, r.code, r.body);
      }
      case 'list': {
        if (!wantsTable(req)) {
          const r = rest.listJson(t, ns, q);
          return sendJsonList(res, r.code, r.envelope, r.items);
        }
        const r = rest.list(t, ns, q);
        const list = r.body as { items: KubeObject[]; metadata: { resourceVersion?: string; continue?: string } };
        return sendJson(res, r.code, toTable(t, list.items, { nowMs: this.#p.now(), include: includeObjectParam(q), ...(list.metadata.resourceVersion ? { resourceVersion: list.metadata.resourceVersion } : {}), ...(list.metadata.continue ? { continueToken: list.metadata.continue } : {}) }));
      }
      case 'watch':
        return this.#watch(req, res, info, q);
      case 'create': {
        if (sub !== undefined) throw methodNotAllowed();
        const body = await this.#body(req, BODY_TYPES);
        const r = rest.create(t, ns, body, q, user);
        return sendJson(res, r.code, r.body);
      }
      case 'update': {
        this.#checkSigner(user, info);
        const body = await this.#body(req, BODY_TYPES);
        const r = rest.update(t, ns, name!, body, sub, q, user);
        return sendJson(res, r.code, r.body);
      }
      case 'patch': {
        this.#checkSigner(user, info);
        const body = await this.#body(req, PATCH_TYPES);
        const r = rest.patch(t, ns, name!, mediaType(req), body, sub, q, user);
        return sendJson(res, r.code, r.body);
      }
      case 'delete': {
        if (sub !== undefined) throw methodNotAllowed();
        const raw = await readBody(req, this.#p.maxBodyBytes);
        const options = raw.length > 0 ? decodeBody(mediaType(req) || 'application/json', raw, BODY_TYPES) : {};
        const r = rest.delete(t, ns, name!, options, q);
        return sendJson(res, r.code, r.body);
      }
      case 'deletecollection': {
        const r = rest.deleteCollection(t, ns, q);
        return sendJson(res, r.code, r.body);
      }
      default:
        throw methodNotAllowed();
    }
  }

  /** The review resources (TokenReview, the access reviews): create-only, answered from the request, never stored. */
  async #review(req: IncomingMessage, res: ServerResponse, user: UserInfo, info: Extract<RequestInfo, { kind: 'resource' }>): Promise<void> {
    const { type: t, namespace: ns, name, verb } = info;
    const { reviews } = this.#p;
    if (verb !== 'create' || name !== undefined) throw methodNotAllowed();
    const body = await this.#body(req, BODY_TYPES);
    let out: Record<string, unknown>;
    switch (t.plural) {
      case 'tokenreviews':
        out = await reviews.tokenReview(body);
        break;
      case 'subjectaccessreviews':
        out = reviews.subjectAccessReview(body);
        break;
      case 'localsubjectaccessreviews':
        out = reviews.subjectAccessReview(body, ns);
        break;
      case 'selfsubjectaccessreviews':
        out = reviews.selfSubjectAccessReview(body, user);
        break;
      case 'selfsubjectrulesreviews':
        out = reviews.selfSubjectRulesReview(body, user);
        break;
      case 'selfsubjectreviews':
        out = reviews.selfSubjectReview(user);
        break;
      default:
        throw unknownPath();
    }
    sendJson(res, 201, out);
  }

  /** A watch of a collection: selectors, resourceVersion, bookmarks and timeout from the query. */
  #watch(req: IncomingMessage, res: ServerResponse, info: Extract<RequestInfo, { kind: 'resource' }>, q: URLSearchParams): void {
    const { type: t, namespace: ns, name } = info;
    if (name !== undefined) throw badRequest('watch of a single object: use fieldSelector=metadata.name=<name>');
    const timeout = q.get('timeoutSeconds');
    const fault = { method: req.method ?? 'GET', path: new URL(req.url ?? '/', 'https://devcluster.invalid').pathname, watch: true, query: q };
    serveWatch(req, res, this.#p.store, this.#p.hub, {
      fault,
      silent: this.#p.faults.takeSilence(fault),
      type: t,
      namespace: ns,
      labels: parseLabelSelector(q.get('labelSelector') ?? undefined),
      fields: parseFieldSelector(q.get('fieldSelector') ?? undefined, t.fields ?? []),
      resourceVersion: q.get('resourceVersion') ?? undefined,
      allowBookmarks: q.get('allowWatchBookmarks') === 'true' || q.get('allowWatchBookmarks') === '1',
      sendInitialEvents: q.get('sendInitialEvents') === 'true',
      timeoutSeconds: timeout !== null && /^\d+$/.test(timeout) ? Number(timeout) : undefined,
      ...(wantsTable(req) ? { render: (o: KubeObject) => toTable(t, [o], { nowMs: this.#p.now(), include: includeObjectParam(q) }) } : {}),
    });
  }

  /**
   * Approving a CSR (`/approval`) also needs `approve`, and issuing it (`/status`) `sign`, on
   * `signers` named after its signerName (or `<domain>/*`), as the real server checks.
   */
  #checkSigner(user: UserInfo, info: Extract<RequestInfo, { kind: 'resource' }>): void {
    if (info.type.group !== 'certificates.k8s.io' || info.type.plural !== 'certificatesigningrequests') return;
    if (info.subresource !== 'approval' && info.subresource !== 'status') return;
    const csr = this.#p.store.get(info.type, undefined, info.name ?? '');
    if (!csr) return; // the handler answers 404
    const signer = String((csr.spec as { signerName?: string } | undefined)?.signerName ?? '');
    const verb = info.subresource === 'approval' ? 'approve' : 'sign';
    if (!isAuthorizedForSignerName(this.#p.rbac, user, verb, signer)) {
      throw forbidden(`certificatesigningrequests.certificates.k8s.io "${info.name}" is forbidden: user not permitted to ${verb} requests with signerName "${signer}"`, {
        name: info.name ?? '', group: 'certificates.k8s.io', kind: 'certificatesigningrequests',
      });
    }
  }

  /** `POST /devcluster/faults` (admin only): the fault-injection handle over HTTP. */
  async #admin(req: IncomingMessage, res: ServerResponse, user: UserInfo, path: string): Promise<void> {
    if (!user.groups.includes('system:masters')) {
      if (user === ANONYMOUS) throw unauthorized();
      throw forbidden(`forbidden: User "${user.username}" cannot post path "${path}"`, {});
    }
    if (path !== '/devcluster/faults') throw unknownPath();
    if (req.method !== 'POST') throw methodNotAllowed();
    const raw = await this.#body(req, ['application/json']);
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw badRequest('the fault request must be a JSON object');
    const dropped = applyFaultRequest(this.#p.faults, raw as Record<string, unknown>);
    sendJson(res, 200, { droppedWatches: dropped, resourceVersion: String(this.#p.store.resourceVersion), openWatches: this.#p.faults.openWatches });
  }
}
