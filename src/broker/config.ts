/**
 * The node broker's configuration: one frozen typed object. `startBroker` takes it directly
 * (tests, `npm start`); `readBrokerConfig` builds it from flags and environment variables for
 * `certbroker broker`, listing every problem at once.
 */
import { readFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import { ConfigReader } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import { readInformerSettings, type InformerSettings } from '../kube/informer-settings.js';
import { parseCaTarget } from '../grpc/ca-target.js';
import { DEFAULT_CNI_EVENT_SOCKET } from '../protocol/cni-event.js';
import { CA_TOKEN_AUDIENCE, DEFAULT_CLUSTER_ID } from '../protocol/istio-ca.js';
import { readWorkloadApiSettings, type WorkloadApiFlags, type WorkloadApiSettings } from './workload-api-config.js';
import { ISTIO_CA_FRONT_DEFAULTS, ISTIO_CA_FRONT_ENV, readIstioCaFrontSettings, type IstioCaFrontConfig } from './istio-ca-front-config.js';

export const ENV = Object.freeze({
  TRUST_DOMAIN: 'TRUST_DOMAIN',
  NODE_NAME: 'NODE_NAME',
  POD_NAME: 'POD_NAME',
  POD_NAMESPACE: 'POD_NAMESPACE',
  POD_UID: 'POD_UID',
  SERVICE_ACCOUNT: 'SERVICE_ACCOUNT',
  CA_ADDRESS: 'CA_ADDRESS',
  CA_ROOT_CERT_FILE: 'CA_ROOT_CERT_FILE',
  CA_TLS_SERVER_NAME: 'CA_TLS_SERVER_NAME',
  CLUSTER_ID: 'CLUSTER_ID',
  CA_AUDIENCE: 'CA_TOKEN_AUDIENCE',
  TOKEN_EXPIRATION_SECONDS: 'BROKER_TOKEN_EXPIRATION_SECONDS',
  TOKEN_FILE: 'BROKER_TOKEN_FILE',
  TOKEN_SOURCE: 'BROKER_TOKEN_SOURCE',
  CERT_TTL_SECONDS: 'WORKLOAD_CERT_TTL_SECONDS',
  MAX_CONCURRENT_FETCHES: 'BROKER_MAX_CONCURRENT_FETCHES',
  FORGET_GRACE_SECONDS: 'BROKER_FORGET_GRACE_SECONDS',
  BROKER_SOCKET: 'SPIFFE_BROKER_SOCKET',
  CNI_EVENT_SOCKET: 'CNI_EVENT_SOCKET',
  WORKLOAD_API_SOCKET: 'WORKLOAD_API_SOCKET',
  ALLOWED_CALLERS: 'BROKER_ALLOWED_CALLERS',
  KUBERNETES_REFERENCE_CALLERS: 'BROKER_KUBERNETES_REFERENCE_CALLERS',
  PID_REFERENCE_CALLERS: 'BROKER_PID_REFERENCE_CALLERS',
  UPDATE_JITTER_MS: 'BROKER_UPDATE_JITTER_MS',
  OPS_ADDRESS: 'BROKER_OPS_ADDRESS',
  KUBECONFIG: 'KUBECONFIG',
  SHUTDOWN_SECONDS: 'BROKER_SHUTDOWN_GRACE_SECONDS',
  LOG_LEVEL: 'LOG_LEVEL',
});

export const DEFAULTS = Object.freeze({
  trustDomain: 'cluster.local',
  serviceAccount: 'ztunnel',
  caAddress: 'istiod.istio-system.svc:15012',
  caRootCertFile: '/var/run/secrets/istio/root-cert.pem',
  clusterId: DEFAULT_CLUSTER_ID,
  caAudience: CA_TOKEN_AUDIENCE,
  tokenExpirationSeconds: 3600,
  certTtlSeconds: 24 * 3600,
  maxConcurrentFetches: 8,
  forgetGraceSeconds: 30,
  brokerSocket: 'unix:///var/run/certbroker/broker.sock',
  cniEventSocket: DEFAULT_CNI_EVENT_SOCKET,
  /** Update pacing window (see BrokerConfig.updateJitterMs). */
  updateJitterMs: 1000,
  opsAddress: '0.0.0.0:15022',
  shutdownGraceSeconds: 5,
});

/** The default allow-list: ztunnel of the trust domain. */
export function defaultAllowedCallers(trustDomain: string): string[] {
  return [`spiffe://${trustDomain}/ns/istio-system/sa/ztunnel`];
}

/** Accepted range of BROKER_UPDATE_JITTER_MS (milliseconds). */
export const UPDATE_JITTER_RANGE_MS = Object.freeze({ min: 0, max: 60_000 });

export type TokenSourceKind = 'token-request' | 'file';

export interface BrokerConfig {
  readonly trustDomain: string;
  readonly nodeName: string;
  /** The broker's own pod (downward API) and service account. */
  readonly pod: { readonly namespace: string; readonly name: string; readonly uid: string; readonly serviceAccount: string };
  readonly ca: {
    /** The CA replicas (grpc/ca-target.ts): a DNS name (a headless Service: every address), an IP, or a list of IPs. */
    readonly address: string;
    /** PEM mesh root(s): verify the CA's TLS, verify consumers, initial trust bundle. */
    readonly rootsPem: string;
    /** The file `rootsPem` was read from: looked at again for the CA's TLS trust (ca-trust.ts). */
    readonly rootFile?: string;
    /** How often (default CA_ROOT_FILE_POLL_MS, 30 s). */
    readonly rootFilePollMs?: number;
    readonly tlsServerName?: string;
    readonly clusterId: string;
    readonly audience: string;
    readonly certTtlSeconds: number;
  };
  readonly tokenExpirationSeconds: number;
  /** Projected token file: the fallback when TokenRequest fails, or the only source (`tokenSource: 'file'`). */
  readonly tokenFile?: string;
  /**
   * Where the broker's CA token comes from. `token-request` (default): TokenRequest for its own
   * service account, bound to its own pod; needs `serviceaccounts/token` create, which RBAC cannot
   * limit to the broker's own pod (see docs/security.md). `file`: only the kubelet-projected token
   * in `tokenFile` (audience istio-ca), so the broker needs no token permission at all.
   */
  readonly tokenSource?: TokenSourceKind;
  readonly maxConcurrentFetches: number;
  readonly forgetGraceMs: number;
  /** Filesystem path of the Broker API socket. */
  readonly brokerSocketPath: string;
  /** Filesystem path of the CNI registration socket. */
  readonly cniEventSocketPath: string;
  /**
   * Filesystem path of the SPIFFE Workload API socket (`WORKLOAD_API_SOCKET`, `unix:///path`, the
   * form SPIFFE_ENDPOINT_SOCKET takes); unset: not served. Any local process may connect; callers
   * are attested from the kernel (needs hostPID and perl: docs/security.md).
   */
  readonly workloadApiSocketPath?: string;
  /** How the Workload API reads SO_PEERCRED, its connection and stream bounds (workload-api-config.ts); defaults when absent. */
  readonly workloadApi?: WorkloadApiSettings;
  readonly allowedCallers: readonly string[];
  /**
   * Who may use each kind of workload reference on the Broker API (`BROKER_KUBERNETES_REFERENCE_CALLERS`,
   * `BROKER_PID_REFERENCE_CALLERS`): SPIFFE IDs, each also on `allowedCallers`. Absent: every
   * allowed caller may use both kinds.
   */
  readonly referenceCallers?: { readonly kubernetes?: readonly string[]; readonly pid?: readonly string[] };
  /**
   * Update pacing window in milliseconds (`BROKER_UPDATE_JITTER_MS`, default 1000, 0..60 000):
   * after a rotation or bundle change each open stream sends its full state after its own random
   * delay in [0, updateJitterMs), so one change does not reach every consumer at once. 0 = at once.
   */
  readonly updateJitterMs: number;
  /** host and port of /healthz, /readyz, /metrics; port 0 picks one, undefined disables. */
  readonly ops?: { readonly host: string; readonly port: number };
  /**
   * The node-local Istio CA (`CreateCertificate`) for released ztunnel (docs/ztunnel.md);
   * undefined disables it. `readBrokerConfig` enables it on 127.0.0.1:15012 unless
   * ISTIO_CA_FRONT_ADDRESS is `off` (or empty).
   */
  readonly istioCaFront?: IstioCaFrontConfig;
  readonly shutdownGraceMs: number;
  readonly kubeConfig: KubeConfig;
  /** The node pod watch's watchdog, page size and backoff (src/kube defaults when absent). */
  readonly informer?: InformerSettings;
  readonly logger: Logger;
  readonly clock?: Clock;
  readonly rng?: Rng;
}

export interface BrokerFlags extends WorkloadApiFlags {
  readonly trustDomain?: string;
  readonly nodeName?: string;
  readonly caAddress?: string;
  readonly caRootCertFile?: string;
  readonly brokerSocket?: string;
  readonly cniEventSocket?: string;
  readonly workloadApiSocket?: string;
  readonly opsAddress?: string;
  readonly kubeconfig?: string;
  readonly allowedCallers?: string;
  readonly certTtlSeconds?: string;
  readonly istioCaFrontAddress?: string;
  readonly istioCaFrontAltHostname?: string;
}

/** Each reference kind's callers: a list of allowed callers (default: all of them). */
function readReferenceCallers(r: ConfigReader, allowedCallers: readonly string[]): { kubernetes: string[]; pid: string[] } {
  const read = (name: string): string[] => {
    const list = r.list(name, allowedCallers);
    for (const c of list) if (!allowedCallers.includes(c)) r.problem(`${name} entry ${JSON.stringify(c)} is not on ${ENV.ALLOWED_CALLERS}`);
    return list;
  };
  return { kubernetes: read(ENV.KUBERNETES_REFERENCE_CALLERS), pid: read(ENV.PID_REFERENCE_CALLERS) };
}

/** `unix:///path` or `/path` -> `/path`; undefined if neither. */
export function unixSocketPath(value: string): string | undefined {
  if (value.startsWith('unix://')) return value.slice('unix://'.length) || undefined;
  if (value.startsWith('/')) return value;
  return undefined;
}

/**
 * The Workload API endpoint as the SPIFFE Workload Endpoint spells it: `unix:///absolute/path`
 * (no authority, nothing after the path); a bare absolute path is accepted too.
 */
export function workloadEndpointPath(value: string): string | undefined {
  const path = value.startsWith('unix://') ? value.slice('unix://'.length) : value;
  if (!path.startsWith('/') || /[?#]/.test(path)) return undefined;
  return path;
}

function hostPort(r: ConfigReader, name: string, value: string): { host: string; port: number } | undefined {
  const m = /^(\[[^\]]+\]|[^:]*):(\d{1,5})$/.exec(value);
  if (!m || Number(m[2]) > 65535) {
    r.problem(`${name}=${JSON.stringify(value)} is not host:port`);
    return undefined;
  }
  return { host: m[1]!.replace(/^\[|\]$/g, '') || '0.0.0.0', port: Number(m[2]) };
}

/**
 * Builds the configuration from flags (which win) and environment variables; reads the root
 * file and the kubeconfig. Throws one ConfigError naming every problem.
 */
export async function readBrokerConfig(
  options: { readonly flags?: BrokerFlags; readonly env?: NodeJS.ProcessEnv; readonly logger: Logger },
): Promise<BrokerConfig> {
  const f = options.flags ?? {};
  const r = new ConfigReader(options.env ?? process.env);
  // The logger exists before this (runBroker makes it first); a bad level is listed here with the rest.
  r.logLevel(ENV.LOG_LEVEL);
  const trustDomain = r.string(ENV.TRUST_DOMAIN, DEFAULTS.trustDomain, f.trustDomain);
  const nodeName = r.required(ENV.NODE_NAME, f.nodeName);
  const podName = r.required(ENV.POD_NAME);
  const podNamespace = r.required(ENV.POD_NAMESPACE);
  const podUid = r.required(ENV.POD_UID);
  const serviceAccount = r.string(ENV.SERVICE_ACCOUNT, DEFAULTS.serviceAccount);
  const caAddress = r.string(ENV.CA_ADDRESS, DEFAULTS.caAddress, f.caAddress);
  const rootFile = r.string(ENV.CA_ROOT_CERT_FILE, DEFAULTS.caRootCertFile, f.caRootCertFile);
  let rootsPem = '';
  try {
    rootsPem = readFileSync(rootFile, 'utf8');
    if (!rootsPem.includes('-----BEGIN CERTIFICATE-----')) r.problem(`${ENV.CA_ROOT_CERT_FILE}=${rootFile} holds no PEM certificate`);
  } catch (err) {
    r.problem(`${ENV.CA_ROOT_CERT_FILE}=${rootFile} cannot be read: ${(err as Error).message}`);
  }
  const tlsServerName = r.optionalString(ENV.CA_TLS_SERVER_NAME);
  const caTarget = parseCaTarget(caAddress);
  if ('problem' in caTarget) r.problem(`${ENV.CA_ADDRESS}: ${caTarget.problem}`);
  else if (caTarget.endpoints.length > 1 && !tlsServerName) r.problem(`${ENV.CA_ADDRESS} lists ${caTarget.endpoints.length} addresses: set ${ENV.CA_TLS_SERVER_NAME} to the DNS name in the CA replicas' serving certificates`);
  const clusterId = r.string(ENV.CLUSTER_ID, DEFAULTS.clusterId);
  const audience = r.string(ENV.CA_AUDIENCE, DEFAULTS.caAudience);
  const tokenExpirationSeconds = r.int(ENV.TOKEN_EXPIRATION_SECONDS, DEFAULTS.tokenExpirationSeconds, { min: 600, max: 86_400 * 2 });
  const tokenFile = r.optionalString(ENV.TOKEN_FILE);
  const tokenSource = r.string(ENV.TOKEN_SOURCE, 'token-request');
  if (tokenSource !== 'token-request' && tokenSource !== 'file') {
    r.problem(`${ENV.TOKEN_SOURCE}=${JSON.stringify(tokenSource)} is not token-request or file`);
  } else if (tokenSource === 'file' && !tokenFile) {
    r.problem(`${ENV.TOKEN_SOURCE}=file needs ${ENV.TOKEN_FILE} (the projected token with audience istio-ca)`);
  }
  const certTtlSeconds = r.int(ENV.CERT_TTL_SECONDS, DEFAULTS.certTtlSeconds, { min: 60, max: 90 * 86_400, explicit: f.certTtlSeconds });
  const maxConcurrentFetches = r.int(ENV.MAX_CONCURRENT_FETCHES, DEFAULTS.maxConcurrentFetches, { min: 1, max: 1024 });
  const forgetGraceSeconds = r.int(ENV.FORGET_GRACE_SECONDS, DEFAULTS.forgetGraceSeconds, { min: 0, max: 3600 });
  const brokerSocketRaw = r.string(ENV.BROKER_SOCKET, DEFAULTS.brokerSocket, f.brokerSocket);
  const brokerSocketPath = unixSocketPath(brokerSocketRaw);
  if (!brokerSocketPath) r.problem(`${ENV.BROKER_SOCKET}=${JSON.stringify(brokerSocketRaw)} is not unix:///path`);
  const cniRaw = r.string(ENV.CNI_EVENT_SOCKET, DEFAULTS.cniEventSocket, f.cniEventSocket);
  const cniEventSocketPath = unixSocketPath(cniRaw);
  if (!cniEventSocketPath) r.problem(`${ENV.CNI_EVENT_SOCKET}=${JSON.stringify(cniRaw)} is not an absolute path`);
  const workloadRaw = r.optionalString(ENV.WORKLOAD_API_SOCKET, f.workloadApiSocket);
  const workloadApiSocketPath = workloadRaw === undefined ? undefined : workloadEndpointPath(workloadRaw);
  if (workloadRaw !== undefined && !workloadApiSocketPath) r.problem(`${ENV.WORKLOAD_API_SOCKET}=${JSON.stringify(workloadRaw)} is not unix:///absolute/path`);
  else if (workloadApiSocketPath && [brokerSocketPath, cniEventSocketPath].includes(workloadApiSocketPath)) {
    r.problem(`${ENV.WORKLOAD_API_SOCKET}=${JSON.stringify(workloadRaw)} is another socket of the broker`);
  }
  const workloadApi = workloadApiSocketPath ? readWorkloadApiSettings(r, f) : undefined;
  const allowedCallers = r.list(ENV.ALLOWED_CALLERS, defaultAllowedCallers(trustDomain), f.allowedCallers);
  for (const c of allowedCallers) if (!c.startsWith('spiffe://')) r.problem(`${ENV.ALLOWED_CALLERS} entry ${JSON.stringify(c)} is not a SPIFFE ID`);
  const referenceCallers = readReferenceCallers(r, allowedCallers);
  const updateJitterMs = r.int(ENV.UPDATE_JITTER_MS, DEFAULTS.updateJitterMs, UPDATE_JITTER_RANGE_MS);
  const opsRaw = r.string(ENV.OPS_ADDRESS, DEFAULTS.opsAddress, f.opsAddress);
  const ops = opsRaw === 'off' ? undefined : hostPort(r, ENV.OPS_ADDRESS, opsRaw);
  // Empty (flag or env) disables the front, as `off` does.
  const frontRaw = (options.env ?? process.env)[ISTIO_CA_FRONT_ENV.ADDRESS] === '' && f.istioCaFrontAddress === undefined ? '' : r.string(ISTIO_CA_FRONT_ENV.ADDRESS, ISTIO_CA_FRONT_DEFAULTS.address, f.istioCaFrontAddress);
  const frontAddress = frontRaw === 'off' || frontRaw === '' ? undefined : hostPort(r, ISTIO_CA_FRONT_ENV.ADDRESS, frontRaw);
  const istioCaFront = frontAddress ? readIstioCaFrontSettings(r, frontAddress, { ...(f.istioCaFrontAltHostname !== undefined ? { altHostname: f.istioCaFrontAltHostname } : {}) }) : undefined;
  const shutdownGraceSeconds = r.int(ENV.SHUTDOWN_SECONDS, DEFAULTS.shutdownGraceSeconds, { min: 0, max: 300 });
  const kubeconfigPath = r.optionalString(ENV.KUBECONFIG, f.kubeconfig);
  const informer = readInformerSettings(r);
  r.done();

  // Imported on demand, as client-node was before, so importing this module does not load client-node.
  const { loadKubeConfig } = await import('../kube/kubeconfig.js');
  const kubeConfig = kubeconfigPath ? loadKubeConfig({ kubeconfigPath }) : loadKubeConfig({ inCluster: true });

  return Object.freeze({
    trustDomain,
    nodeName,
    pod: { namespace: podNamespace, name: podName, uid: podUid, serviceAccount },
    ca: { address: caAddress, rootsPem, rootFile, ...(tlsServerName ? { tlsServerName } : {}), clusterId, audience, certTtlSeconds },
    tokenExpirationSeconds,
    ...(tokenFile ? { tokenFile } : {}),
    tokenSource: tokenSource as TokenSourceKind,
    maxConcurrentFetches,
    forgetGraceMs: forgetGraceSeconds * 1000,
    brokerSocketPath: brokerSocketPath!,
    cniEventSocketPath: cniEventSocketPath!,
    ...(workloadApiSocketPath ? { workloadApiSocketPath } : {}),
    ...(workloadApi ? { workloadApi } : {}),
    allowedCallers,
    referenceCallers,
    updateJitterMs,
    ...(ops ? { ops } : {}),
    ...(istioCaFront ? { istioCaFront } : {}),
    shutdownGraceMs: shutdownGraceSeconds * 1000,
    kubeConfig,
    informer,
    logger: options.logger,
  });
}
