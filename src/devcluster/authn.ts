/**
 * Bearer-token authentication, shared by every request and by TokenReview: the static admin
 * token, or a service-account JWT from our issuer whose audience intersects the wanted
 * audiences and whose service account and bound pod/secret still exist with the same UIDs.
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import type { ObjectStore } from './store.js';
import { findResource, type ResourceType } from './resources.js';
import type { TokenIssuer } from './tokens.js';

export interface UserInfo {
  readonly username: string;
  readonly uid?: string;
  readonly groups: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

export const ADMIN_USER = 'devcluster-admin';

export type AuthnResult =
  | { readonly ok: true; readonly user: UserInfo; readonly audiences: readonly string[] }
  | { readonly ok: false; readonly reason: string };

const POD = findResource('', 'v1', 'pods')!;
const SA = findResource('', 'v1', 'serviceaccounts')!;
const SECRET = findResource('', 'v1', 'secrets')!;

function sameSecret(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

export function serviceAccountUser(namespace: string, name: string): { username: string; groups: string[] } {
  return {
    username: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
  };
}

export class Authenticator {
  readonly #adminToken: string;
  readonly #issuer: TokenIssuer;
  readonly #store: ObjectStore;
  readonly apiAudiences: readonly string[];

  constructor(options: { adminToken: string; issuer: TokenIssuer; store: ObjectStore; apiAudiences: readonly string[] }) {
    this.#adminToken = options.adminToken;
    this.#issuer = options.issuer;
    this.#store = options.store;
    this.apiAudiences = options.apiAudiences;
  }

  /** Authenticates `token` for `audiences` (default: the API server's own audiences). */
  async authenticate(token: string, audiences: readonly string[] = this.apiAudiences): Promise<AuthnResult> {
    if (token === '') return { ok: false, reason: 'empty token' };
    if (sameSecret(token, this.#adminToken)) {
      return { ok: true, user: { username: ADMIN_USER, groups: ['system:masters', 'system:authenticated'] }, audiences: [...audiences] };
    }
    const v = await this.#issuer.verify(token);
    if (!v.ok) return { ok: false, reason: v.reason };
    const c = v.claims;
    const wanted = audiences.filter((a) => c.aud.includes(a));
    if (wanted.length === 0) return { ok: false, reason: 'token audiences is invalid for the target audiences' };
    const k = c['kubernetes.io'];
    const sa = this.#store.get(SA, k.namespace, k.serviceaccount.name);
    if (!sa || sa.metadata.uid !== k.serviceaccount.uid) {
      return { ok: false, reason: 'service account token has been invalidated' };
    }
    const extra: Record<string, string[]> = { 'authentication.kubernetes.io/credential-id': [`JTI=${c.jti}`] };
    if (k.pod) {
      if (!this.#boundStillExists(POD, k.namespace, k.pod.name, k.pod.uid)) {
        return { ok: false, reason: 'service account token has been invalidated' };
      }
      extra['authentication.kubernetes.io/pod-name'] = [k.pod.name];
      extra['authentication.kubernetes.io/pod-uid'] = [k.pod.uid];
    }
    if (k.secret && !this.#boundStillExists(SECRET, k.namespace, k.secret.name, k.secret.uid)) {
      return { ok: false, reason: 'service account token has been invalidated' };
    }
    if (k.node) {
      extra['authentication.kubernetes.io/node-name'] = [k.node.name];
      extra['authentication.kubernetes.io/node-uid'] = [k.node.uid];
    }
    const base = serviceAccountUser(k.namespace, k.serviceaccount.name);
    return { ok: true, user: { ...base, uid: k.serviceaccount.uid, extra }, audiences: wanted };
  }

  #boundStillExists(t: ResourceType, ns: string, name: string, uid: string): boolean {
    const o = this.#store.get(t, ns, name);
    return o !== undefined && o.metadata.uid === uid;
  }
}
