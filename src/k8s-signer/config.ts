/**
 * `certbroker k8s-signer` configuration: one frozen object, flags over env, every problem listed
 * at once. The plug-in CA is a `cacerts` directory (a mounted Secret, as Istio's plug-in CA).
 */
import { ConfigReader } from '../core/config.js';
import type { LogLevel } from '../core/log.js';
import { signerNameProblem } from '../core/signer-name.js';
import { readInformerSettings, type InformerSettings } from '../kube/informer-settings.js';
import { MAX_LEAF_TTL_SECONDS } from '../pki/profile.js';
import { PCR_MIN_LIFETIME_SECONDS } from './pcr-policy.js';

export const K8S_SIGNER_ENV = Object.freeze({
  SIGNER_NAME: 'K8S_SIGNER_NAME',
  TRUST_DOMAIN: 'TRUST_DOMAIN',
  CACERTS_DIR: 'K8S_SIGNER_CACERTS_DIR',
  CACERTS_SECRET: 'K8S_SIGNER_CACERTS_SECRET',
  CONTROLLERS: 'K8S_SIGNER_CONTROLLERS',
  DEFAULT_TTL_SECONDS: 'K8S_SIGNER_DEFAULT_TTL_SECONDS',
  MAX_TTL_SECONDS: 'K8S_SIGNER_MAX_TTL_SECONDS',
  SERVING_REQUESTERS: 'K8S_SIGNER_SERVING_REQUESTERS',
  OPS_ADDRESS: 'K8S_SIGNER_OPS_ADDRESS',
  KUBECONFIG: 'KUBECONFIG',
  SHUTDOWN_SECONDS: 'K8S_SIGNER_SHUTDOWN_GRACE_SECONDS',
  LOG_LEVEL: 'LOG_LEVEL',
});

/** The controllers there are (k8s-signer.ts's CONTROLLERS has one factory per name). */
export const CONTROLLER_NAMES = ['csr', 'pcr'] as const;
export type ControllerName = (typeof CONTROLLER_NAMES)[number];
/**
 * What runs unless K8S_SIGNER_CONTROLLERS says otherwise: CSRs only. PodCertificateRequests are
 * beta and off by default in Kubernetes 1.35 (feature gate and v1beta1 API): a controller for
 * an API the cluster does not serve would keep the signer not ready.
 */
export const DEFAULT_CONTROLLERS: readonly ControllerName[] = ['csr'];

export const DEFAULT_K8S_SIGNER_TTL_SECONDS = 24 * 3600;
export const DEFAULT_SERVING_REQUESTERS: readonly string[] = ['istio-system/certbroker-ca'];
export const DEFAULT_K8S_SIGNER_OPS_ADDRESS = '0.0.0.0:15018';

export interface K8sSignerConfig {
  readonly signerName: string;
  readonly trustDomain: string;
  readonly cacertsDir: string;
  /** The plug-in CA from this Secret (`namespace/name`) through the API instead of `cacertsDir`. */
  readonly cacertsSecret: { readonly namespace: string; readonly name: string } | undefined;
  readonly controllers: readonly ControllerName[];
  readonly defaultTtlSeconds: number;
  readonly maxTtlSeconds: number;
  readonly servingRequesters: readonly string[];
  /** Undefined: no ops endpoint. */
  readonly ops: { readonly host: string; readonly port: number } | undefined;
  readonly kubeconfigPath: string | undefined;
  readonly shutdownGraceMs: number;
  readonly logLevel: LogLevel;
  readonly informer: InformerSettings;
}

export interface K8sSignerFlags {
  readonly signerName?: string;
  readonly trustDomain?: string;
  readonly cacertsDir?: string;
  readonly cacertsSecret?: string;
  readonly opsAddress?: string;
  readonly kubeconfig?: string;
  /** Comma-separated controller names (`csr`, `pcr`). */
  readonly controllers?: string;
}

export function readK8sSignerConfig(flags: K8sSignerFlags, env: Readonly<Record<string, string | undefined>> = process.env): K8sSignerConfig {
  const E = K8S_SIGNER_ENV;
  const r = new ConfigReader(env);
  const signerName = r.string(E.SIGNER_NAME, '', flags.signerName);
  const nameProblem = signerNameProblem(signerName);
  if (nameProblem !== undefined) r.problem(`${E.SIGNER_NAME} (--signer-name) ${JSON.stringify(signerName)}: ${nameProblem}`);
  const controllers = r.list(E.CONTROLLERS, DEFAULT_CONTROLLERS, flags.controllers);
  const unknown = controllers.filter((c) => !(CONTROLLER_NAMES as readonly string[]).includes(c));
  if (unknown.length > 0) r.problem(`${E.CONTROLLERS} names unknown controllers ${JSON.stringify(unknown)} (known: ${CONTROLLER_NAMES.join(', ')})`);
  if (controllers.length === 0) r.problem(`${E.CONTROLLERS} names no controller`);
  const defaultTtlSeconds = r.int(E.DEFAULT_TTL_SECONDS, DEFAULT_K8S_SIGNER_TTL_SECONDS, { min: 60 });
  const maxTtlSeconds = r.int(E.MAX_TTL_SECONDS, MAX_LEAF_TTL_SECONDS, { min: 60, max: MAX_LEAF_TTL_SECONDS });
  if (defaultTtlSeconds > maxTtlSeconds) r.problem(`${E.DEFAULT_TTL_SECONDS}=${defaultTtlSeconds} is above ${E.MAX_TTL_SECONDS}=${maxTtlSeconds}`);
  // kube-apiserver refuses a pod certificate living under an hour: no PCR could ever be issued.
  if (controllers.includes('pcr') && maxTtlSeconds < PCR_MIN_LIFETIME_SECONDS) {
    r.problem(`${E.MAX_TTL_SECONDS}=${maxTtlSeconds} is below ${PCR_MIN_LIFETIME_SECONDS}, the shortest pod certificate the API server accepts (the pcr controller is on)`);
  }
  const opsRaw = r.string(E.OPS_ADDRESS, DEFAULT_K8S_SIGNER_OPS_ADDRESS, flags.opsAddress);
  let ops: K8sSignerConfig['ops'];
  if (opsRaw !== 'off') {
    const m = /^(\[[^\]]+\]|[^:]*):(\d+)$/u.exec(opsRaw);
    if (!m || Number(m[2]) > 65535) r.problem(`${E.OPS_ADDRESS}=${JSON.stringify(opsRaw)} is not host:port (or off)`);
    else ops = { host: (m[1] ?? '').replace(/^\[|\]$/gu, '') || '0.0.0.0', port: Number(m[2]) };
  }
  const secretRaw = r.optionalString(E.CACERTS_SECRET, flags.cacertsSecret);
  const secret = secretRaw === undefined ? undefined : /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/u.exec(secretRaw);
  if (secretRaw !== undefined && !secret) r.problem(`${E.CACERTS_SECRET} (--cacerts-secret) ${JSON.stringify(secretRaw)} is not namespace/name`);
  const config: K8sSignerConfig = {
    signerName,
    trustDomain: r.string(E.TRUST_DOMAIN, 'cluster.local', flags.trustDomain),
    cacertsDir: r.string(E.CACERTS_DIR, '/etc/cacerts', flags.cacertsDir),
    cacertsSecret: secret ? { namespace: secret[1]!, name: secret[3]! } : undefined,
    controllers: controllers.filter((c): c is ControllerName => (CONTROLLER_NAMES as readonly string[]).includes(c)),
    defaultTtlSeconds,
    maxTtlSeconds,
    servingRequesters: r.accountList(E.SERVING_REQUESTERS, DEFAULT_SERVING_REQUESTERS),
    ops,
    kubeconfigPath: r.optionalString(E.KUBECONFIG, flags.kubeconfig),
    shutdownGraceMs: r.int(E.SHUTDOWN_SECONDS, 10, { min: 0, max: 600 }) * 1000,
    logLevel: r.logLevel(E.LOG_LEVEL),
    informer: readInformerSettings(r),
  };
  r.done();
  return Object.freeze(config);
}
