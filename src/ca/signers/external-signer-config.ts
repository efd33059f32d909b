/**
 * The settings of the signers that sign elsewhere — `istio-upstream` (an upstream Istio CA) and
 * `module:<path-or-package>` (an integrator's module) — read from env and flags by
 * `readCaConfig` (config.ts), every problem listed with the others.
 */
import type { ConfigReader } from '../../core/config.js';
import { DEFAULT_CLUSTER_ID } from '../../protocol/istio-ca.js';
import type { UpstreamSignerSettings } from './upstream-signer.js';

export const EXTERNAL_SIGNER_ENV = Object.freeze({
  UPSTREAM_ADDRESS: 'CA_UPSTREAM_ADDRESS',
  UPSTREAM_ROOT_CERT_FILE: 'CA_UPSTREAM_ROOT_CERT_FILE',
  UPSTREAM_TOKEN_FILE: 'CA_UPSTREAM_TOKEN_FILE',
  UPSTREAM_CLUSTER_ID: 'CA_UPSTREAM_CLUSTER_ID',
  UPSTREAM_TLS_SERVER_NAME: 'CA_UPSTREAM_TLS_SERVER_NAME',
  SIGNER_TIMEOUT_SECONDS: 'CA_SIGNER_TIMEOUT_SECONDS',
});

/** How long one external signing may take by default (upstream call, module `sign`). */
export const DEFAULT_SIGNER_TIMEOUT_SECONDS = 10;

export const MODULE_SIGNER_PREFIX = 'module:';

export type ExternalSigner =
  | ({ readonly kind: 'istio-upstream' } & UpstreamSignerSettings)
  /** The module is loaded by `certbroker ca` (run.ts, `loadSignerModule`) before the CA starts. */
  | { readonly kind: 'module'; readonly specifier: string; readonly timeoutMs: number };

export interface ExternalSignerEnv {
  /** Set when CA_SIGNER / --signer names an external signer. */
  readonly externalSigner?: ExternalSigner;
}

export interface ExternalSignerFlags {
  readonly signer?: string;
  readonly upstreamAddress?: string;
  readonly upstreamRootCertFile?: string;
  readonly upstreamTokenFile?: string;
  readonly upstreamClusterId?: string;
}

/** The external signer `signerVar` (CA_SIGNER) names, or none (then it names a built-in one, checked by the caller). */
export function readExternalSigner(r: ConfigReader, signerVar: string, flags: ExternalSignerFlags): ExternalSignerEnv {
  const E = EXTERNAL_SIGNER_ENV;
  const kind = r.raw(signerVar, flags.signer);
  if (kind !== 'istio-upstream' && !kind?.startsWith(MODULE_SIGNER_PREFIX)) return {};
  const timeoutMs = r.int(E.SIGNER_TIMEOUT_SECONDS, DEFAULT_SIGNER_TIMEOUT_SECONDS, { min: 1, max: 300 }) * 1000;
  if (kind !== 'istio-upstream') {
    const specifier = kind.slice(MODULE_SIGNER_PREFIX.length);
    if (specifier.trim() === '') r.problem(`${signerVar}=${JSON.stringify(kind)} names no module (module:<path-or-package>)`);
    return { externalSigner: { kind: 'module', specifier, timeoutMs } };
  }
  const required = (name: string, flag: string | undefined, flagName: string): string => {
    const v = r.optionalString(name, flag);
    if (v === undefined || v === '') r.problem(`${signerVar}=istio-upstream needs ${name} (${flagName})`);
    return v ?? '';
  };
  const address = required(E.UPSTREAM_ADDRESS, flags.upstreamAddress, '--upstream-address');
  if (address !== '' && !/^(\[[^\]]+\]|[^:\s]+):\d{1,5}$/.test(address)) r.problem(`${E.UPSTREAM_ADDRESS}=${JSON.stringify(address)} is not host:port`);
  const tlsServerName = r.optionalString(E.UPSTREAM_TLS_SERVER_NAME);
  return {
    externalSigner: {
      kind: 'istio-upstream',
      address,
      rootCertFile: required(E.UPSTREAM_ROOT_CERT_FILE, flags.upstreamRootCertFile, '--upstream-root-cert-file'),
      tokenFile: required(E.UPSTREAM_TOKEN_FILE, flags.upstreamTokenFile, '--upstream-token-file'),
      clusterId: r.string(E.UPSTREAM_CLUSTER_ID, DEFAULT_CLUSTER_ID, flags.upstreamClusterId),
      ...(tlsServerName ? { tlsServerName } : {}),
      timeoutMs,
    },
  };
}
