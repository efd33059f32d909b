/**
 * The authentication and authorization API objects that are answered, not stored:
 * TokenRequest (`serviceaccounts/{name}/token`), TokenReview, SubjectAccessReview,
 * LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview and
 * SelfSubjectReview, with the validation rules and messages of the real server.
 */
import type { ObjectStore } from './store.js';
import { findResource } from './resources.js';
import type { Authenticator, UserInfo } from './authn.js';
import type { TokenIssuer } from './tokens.js';
import type { RbacAuthorizer, Attributes } from './rbac.js';
import { isoSeconds } from './admission.js';
import { badRequest, conflict, invalid, notFound } from './status.js';

const POD = findResource('', 'v1', 'pods')!;
const SA = findResource('', 'v1', 'serviceaccounts')!;
const SECRET = findResource('', 'v1', 'secrets')!;
const NODE = findResource('', 'v1', 'nodes')!;

export const MIN_TOKEN_SECONDS = 600;

export interface ReviewOptions {
  readonly store: ObjectStore;
  readonly issuer: TokenIssuer;
  readonly authn: Authenticator;
  readonly rbac: RbacAuthorizer;
  readonly now: () => number;
  /** Longer requests are clamped to this, as --service-account-max-token-expiration does. */
  readonly maxTokenSeconds: number;
}

function obj(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function stringList(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

export class Reviews {
  readonly #o: ReviewOptions;

  constructor(options: ReviewOptions) {
    this.#o = options;
  }

  async tokenRequest(namespace: string, saName: string, body: unknown): Promise<Record<string, unknown>> {
    const req = obj(body);
    if (req.kind !== undefined && req.kind !== 'TokenRequest') throw badRequest(`the kind in the data (${String(req.kind)}) does not match the expected kind (TokenRequest)`);
    const sa = this.#o.store.get(SA, namespace, saName);
    if (!sa) throw notFound('serviceaccounts', '', saName);
    const spec = obj(req.spec);
    const audiences = stringList(spec.audiences);
    const requested = spec.expirationSeconds === undefined || spec.expirationSeconds === null ? 3600 : Number(spec.expirationSeconds);
    if (!Number.isInteger(requested)) {
      throw invalid('TokenRequest', 'authentication.k8s.io', saName, [{ field: 'spec.expirationSeconds', message: `Invalid value: ${JSON.stringify(spec.expirationSeconds)}: must be an integer` }]);
    }
    if (requested < MIN_TOKEN_SECONDS) {
      throw invalid('TokenRequest', 'authentication.k8s.io', saName, [{ field: 'spec.expirationSeconds', message: `Invalid value: ${requested}: may not specify a duration less than 10 minutes` }]);
    }
    if (requested > 2 ** 32) {
      throw invalid('TokenRequest', 'authentication.k8s.io', saName, [{ field: 'spec.expirationSeconds', message: `Invalid value: ${requested}: may not specify a duration larger than 2^32 seconds` }]);
    }
    const expirationSeconds = Math.min(requested, this.#o.maxTokenSeconds);
    const finalAudiences = audiences.length > 0 ? audiences : [...this.#o.authn.apiAudiences];
    const ref = spec.boundObjectRef === undefined || spec.boundObjectRef === null ? undefined : obj(spec.boundObjectRef);
    let pod: { name: string; uid: string } | undefined;
    let secret: { name: string; uid: string } | undefined;
    let node: { name: string; uid: string } | undefined;
    if (ref) {
      const kind = ref.kind;
      const name = typeof ref.name === 'string' ? ref.name : '';
      const uid = typeof ref.uid === 'string' ? ref.uid : '';
      const checkUid = (actual: string | undefined): void => {
        if (uid !== '' && uid !== actual) {
          throw conflict('serviceaccounts', '', saName, `the UID in the bound object reference (${uid}) does not match the UID in record. The object might have been deleted and then recreated`);
        }
      };
      if (kind === 'Pod') {
        const p = this.#o.store.get(POD, namespace, name);
        if (!p) throw notFound('pods', '', name);
        checkUid(p.metadata.uid);
        const podSa = obj(p.spec).serviceAccountName;
        if (podSa !== saName) throw badRequest(`cannot bind token for serviceaccount "${saName}" to pod running with different serviceaccount name.`);
        pod = { name, uid: p.metadata.uid! };
        const nodeName = obj(p.spec).nodeName;
        if (typeof nodeName === 'string' && nodeName !== '') {
          const n = this.#o.store.get(NODE, undefined, nodeName);
          if (n) node = { name: nodeName, uid: n.metadata.uid! };
        }
      } else if (kind === 'Secret') {
        const s = this.#o.store.get(SECRET, namespace, name);
        if (!s) throw notFound('secrets', '', name);
        checkUid(s.metadata.uid);
        secret = { name, uid: s.metadata.uid! };
      } else if (kind === 'Node') {
        const n = this.#o.store.get(NODE, undefined, name);
        if (!n) throw notFound('nodes', '', name);
        checkUid(n.metadata.uid);
        node = { name, uid: n.metadata.uid! };
      } else {
        throw badRequest(`cannot bind token to object of type ${String(kind)}`);
      }
    }
    const { token, claims } = await this.#o.issuer.issue({
      namespace,
      serviceAccount: { name: saName, uid: sa.metadata.uid! },
      audiences: finalAudiences,
      expirationSeconds,
      ...(pod ? { pod } : {}),
      ...(secret ? { secret } : {}),
      ...(node ? { node } : {}),
    });
    return {
      kind: 'TokenRequest',
      apiVersion: 'authentication.k8s.io/v1',
      metadata: { name: saName, namespace, creationTimestamp: isoSeconds(this.#o.now()) },
      spec: { audiences: finalAudiences, expirationSeconds, boundObjectRef: ref ? { kind: ref.kind, apiVersion: 'v1', name: ref.name, uid: pod?.uid ?? secret?.uid ?? node?.uid } : null },
      status: { token, expirationTimestamp: isoSeconds(claims.exp * 1000) },
    };
  }

  async tokenReview(body: unknown): Promise<Record<string, unknown>> {
    const review = obj(body);
    const spec = obj(review.spec);
    const token = typeof spec.token === 'string' ? spec.token : '';
    const audiences = stringList(spec.audiences);
    const base = { kind: 'TokenReview', apiVersion: 'authentication.k8s.io/v1', metadata: { creationTimestamp: null }, spec: { ...(audiences.length ? { audiences } : {}), token } };
    if (token === '') throw invalid('TokenReview', 'authentication.k8s.io', '', [{ field: 'spec.token', message: 'Required value', reason: 'FieldValueRequired' }]);
    const result = await this.#o.authn.authenticate(token, audiences.length > 0 ? audiences : this.#o.authn.apiAudiences);
    if (!result.ok) {
      return { ...base, status: { user: {}, error: `[invalid bearer token, ${result.reason}]` } };
    }
    return {
      ...base,
      status: {
        authenticated: true,
        user: {
          username: result.user.username,
          ...(result.user.uid ? { uid: result.user.uid } : {}),
          groups: [...result.user.groups],
          ...(result.user.extra ? { extra: result.user.extra } : {}),
        },
        audiences: [...result.audiences],
      },
    };
  }

  #accessReview(kind: string, spec: Record<string, unknown>, user: UserInfo, forcedNamespace?: string): Record<string, unknown> {
    const ra = spec.resourceAttributes === undefined ? undefined : obj(spec.resourceAttributes);
    const nra = spec.nonResourceAttributes === undefined ? undefined : obj(spec.nonResourceAttributes);
    if ((ra === undefined) === (nra === undefined)) {
      throw invalid(kind, 'authorization.k8s.io', '', [{ field: 'spec.resourceAttributes', message: 'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified', reason: 'FieldValueInvalid' }]);
    }
    let a: Attributes;
    if (ra) {
      const ns = forcedNamespace ?? (typeof ra.namespace === 'string' && ra.namespace !== '' ? ra.namespace : undefined);
      a = {
        user,
        resourceRequest: true,
        verb: typeof ra.verb === 'string' ? ra.verb : '',
        apiGroup: typeof ra.group === 'string' ? ra.group : '',
        resource: typeof ra.resource === 'string' ? ra.resource : '',
        ...(typeof ra.subresource === 'string' && ra.subresource !== '' ? { subresource: ra.subresource } : {}),
        ...(typeof ra.name === 'string' && ra.name !== '' ? { name: ra.name } : {}),
        ...(ns ? { namespace: ns } : {}),
      };
    } else {
      a = { user, resourceRequest: false, verb: typeof nra!.verb === 'string' ? nra!.verb : '', path: typeof nra!.path === 'string' ? nra!.path : '' };
    }
    const d = this.#o.rbac.authorize(a);
    return { allowed: d.allowed, ...(d.reason ? { reason: d.reason } : {}) };
  }

  subjectAccessReview(body: unknown, namespace?: string): Record<string, unknown> {
    const review = obj(body);
    const spec = obj(review.spec);
    const kind = namespace ? 'LocalSubjectAccessReview' : 'SubjectAccessReview';
    const username = typeof spec.user === 'string' ? spec.user : '';
    const groups = stringList(spec.groups);
    if (username === '' && groups.length === 0) {
      throw invalid(kind, 'authorization.k8s.io', '', [{ field: 'spec.user', message: 'Invalid value: "": at least one of user or group must be specified', reason: 'FieldValueInvalid' }]);
    }
    const extra = obj(spec.extra) as Record<string, readonly string[]>;
    const user: UserInfo = { username, groups, extra, ...(typeof spec.uid === 'string' ? { uid: spec.uid } : {}) };
    const status = this.#accessReview(kind, spec, user, namespace);
    return { kind, apiVersion: 'authorization.k8s.io/v1', metadata: { creationTimestamp: null, ...(namespace ? { namespace } : {}) }, spec, status };
  }

  selfSubjectAccessReview(body: unknown, user: UserInfo): Record<string, unknown> {
    const spec = obj(obj(body).spec);
    const status = this.#accessReview('SelfSubjectAccessReview', spec, user);
    return { kind: 'SelfSubjectAccessReview', apiVersion: 'authorization.k8s.io/v1', metadata: { creationTimestamp: null }, spec, status };
  }

  selfSubjectRulesReview(body: unknown, user: UserInfo): Record<string, unknown> {
    const spec = obj(obj(body).spec);
    const ns = typeof spec.namespace === 'string' ? spec.namespace : '';
    if (ns === '') throw badRequest('no namespace on request');
    const rules = this.#o.rbac.rulesFor(user, ns);
    return {
      kind: 'SelfSubjectRulesReview',
      apiVersion: 'authorization.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec: { namespace: ns },
      status: { ...rules, incomplete: false },
    };
  }

  selfSubjectReview(user: UserInfo): Record<string, unknown> {
    return {
      kind: 'SelfSubjectReview',
      apiVersion: 'authentication.k8s.io/v1',
      metadata: { creationTimestamp: isoSeconds(this.#o.now()) },
      status: { userInfo: { username: user.username, ...(user.uid ? { uid: user.uid } : {}), groups: [...user.groups], ...(user.extra ? { extra: user.extra } : {}) } },
    };
  }
}
