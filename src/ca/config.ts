/**
 * The CA's configuration: one frozen typed object. `startCaServer` takes it directly (tests,
 * the in-process stack); `readCaConfig` builds it from flags and environment variables for
 * `certbroker ca`, listing every problem at once.
 */
import { BlockList, isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import type { Clock } from '../core/clock.js';
import { ConfigError, ConfigReader } from '../core/config.js';
import type { Logger, LogLevel } from '../core/log.js';
import { MAX_LEAF_TTL_SECONDS } from '../pki/profile.js';
import { servingNameProblem } from '../pki/serving-names.js';
import { signerNameProblem } from '../core/signer-name.js';
import { CA_TOKEN_AUDIENCE, DEFAULT_CLUSTER_ID } from '../protocol/istio-ca.js';
import { readInformerSettings, type InformerSettings } from '../kube/informer-settings.js';
import { DEFAULT_JWT_ALGORITHMS, jwtAlgorithmProblems } from './authn/jwt-verifier.js';
import type { CaLimits } from './limits.js';
import { LIMITS_ENV, readLimits } from './limits-config.js';
import { DEFAULT_MAX_CONCURRENT_TOKEN_REVIEWS, TOKEN_REVIEW_TIMEOUT_MS } from './authn/token-review.js';
import { DEFAULT_GRANTABLE_SERVING_NAMES } from './serving-names.js';
import { publishSetting, readPublishConfig, type PublishFlags, type TrustBundlePublishConfig } from './publish/publish-config.js';
import type { Signer } from './signer.js';
import { readStepCaSettings, type StepCaFlags, type StepCaSettings } from './signers/step-ca-config.js';
import { EXTERNAL_SIGNER_ENV, readExternalSigner, type ExternalSignerEnv } from './signers/external-signer-config.js';
import type { ModuleSignerSettings } from './signers/module-signer.js';
import type { UpstreamSignerSettings } from './signers/upstream-signer.js';

export { DEFAULT_GRANTABLE_SERVING_NAMES };

export const ENV = Object.freeze({
  GRPC_ADDRESS: 'CA_GRPC_ADDRESS',
  PLAINTEXT: 'CA_PLAINTEXT',
  OPS_ADDRESS: 'CA_OPS_ADDRESS',
  TRUST_DOMAIN: 'TRUST_DOMAIN',
  SERVING_DNS_NAMES: 'CA_SERVING_DNS_NAMES',
  DEFAULT_TTL_SECONDS: 'DEFAULT_WORKLOAD_CERT_TTL_SECONDS',
  MAX_TTL_SECONDS: 'MAX_WORKLOAD_CERT_TTL_SECONDS',
  TRUSTED_NODE_ACCOUNTS: 'CA_TRUSTED_NODE_ACCOUNTS',
  TRUSTED_REGISTRATION_AUTHORITIES: 'CA_TRUSTED_REGISTRATION_AUTHORITIES',
  GRANTABLE_SERVING_NAMES: 'CA_GRANTABLE_SERVING_NAMES',
  AUDIENCES: 'CA_TOKEN_AUDIENCES',
  CLUSTER_ID: 'CLUSTER_ID',
  KUBECONFIG: 'KUBECONFIG',
  SIGNER: 'CA_SIGNER',
  CACERTS_DIR: 'CA_CACERTS_DIR',
  CA_NAMESPACE: 'CA_NAMESPACE',
  SELF_SIGNED_KEY: 'CA_SELF_SIGNED_KEY',
  SELF_SIGNED_TTL_SECONDS: 'CA_SELF_SIGNED_ROOT_TTL_SECONDS',
  K8S_SIGNER_NAME: 'CA_K8S_SIGNER_NAME',
  K8S_CSR_AUTO_APPROVE: 'CA_K8S_CSR_AUTO_APPROVE',
  K8S_CSR_ROOTS_FILE: 'CA_K8S_CSR_ROOTS_FILE',
  K8S_CSR_TIMEOUT_SECONDS: 'CA_K8S_CSR_TIMEOUT_SECONDS',
  TOKEN_CACHE_SECONDS: 'CA_TOKEN_CACHE_SECONDS',
  OIDC_ISSUER: 'CA_OIDC_ISSUER',
  OIDC_JWKS_URI: 'CA_OIDC_JWKS_URI',
  OIDC_DISCOVERY_URL: 'CA_OIDC_DISCOVERY_URL',
  OIDC_CA_FILE: 'CA_OIDC_CA_FILE',
  JWT_ALGORITHMS: 'CA_JWT_ALGORITHMS',
  TOKEN_REVIEW: 'CA_TOKEN_REVIEW',
  REMOTE_CLUSTERS: 'CA_REMOTE_CLUSTERS',
  WORKERS: 'CA_SIGNING_WORKERS',
  TRANSPORT: 'CA_TRANSPORT',
  SHUTDOWN_SECONDS: 'CA_SHUTDOWN_GRACE_SECONDS',
  TOKEN_NEGATIVE_CACHE_SECONDS: 'CA_TOKEN_NEGATIVE_CACHE_SECONDS',
  TOKEN_REVIEW_TIMEOUT_SECONDS: 'CA_TOKEN_REVIEW_TIMEOUT_SECONDS',
  MAX_CONCURRENT_TOKEN_REVIEWS: 'CA_MAX_CONCURRENT_TOKEN_REVIEWS',
  LOG_LEVEL: 'LOG_LEVEL',
  ...LIMITS_ENV,
  ...EXTERNAL_SIGNER_ENV,
});

export const DEFAULT_TTL_SECONDS = 24 * 3600;
/** istiod's maximum workload TTL (90 days), the same bound pki applies by default. */
export const DEFAULT_MAX_TTL_SECONDS = MAX_LEAF_TTL_SECONDS;
export const DEFAULT_AUDIENCES: readonly string[] = [CA_TOKEN_AUDIENCE];
export const DEFAULT_TRUSTED_NODE_ACCOUNTS: readonly string[] = ['istio-system/ztunnel'];
export const DEFAULT_SERVING_DNS_NAMES: readonly string[] = ['istiod.istio-system.svc', 'certbroker-ca.istio-system.svc', 'localhost'];
export const SELF_SIGNED_SECRET_NAME = 'istio-ca-secret';
/**
 * How long a token TokenReview refused is refused again without asking (by token hash): a
 * client repeating a garbage or forged token costs the API server one review per this.
 */
export const DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS = 10;
/**
 * Signing worker threads by default: one per core. The gRPC main thread shares the cores with
 * them; on the quiet 2-core runs in docs/benchmarks.md two workers beat one (on a heavily loaded
 * machine one was sometimes better — set CA_SIGNING_WORKERS to tune).
 */
export const DEFAULT_SIGNING_WORKERS = Math.max(1, availableParallelism());

/** How one cluster's callers are authenticated. `kubeConfig` is a @kubernetes/client-node KubeConfig. */
export interface ClusterConfig {
  readonly id: string;
  readonly kubeConfig: import('@kubernetes/client-node').KubeConfig;
  readonly audiences: readonly string[];
  /** TokenReview against this cluster (default true). */
  readonly tokenReview: boolean;
  /** Local JWT verification via OIDC discovery + JWKS (tried after TokenReview). */
  readonly oidc?: {
    readonly issuer: string;
    /** Base URL to fetch the discovery document from when the issuer URL is not reachable. */
    readonly discoveryUrl?: string;
    readonly jwksUri?: string;
    readonly caPem?: string;
    readonly algorithms: readonly string[];
    /** Send the CA's own kube credentials when fetching discovery/JWKS. */
    readonly useKubeCredentials?: boolean;
  };
}

export type SignerConfig =
  | {
      readonly kind: 'self-signed';
      /** Namespace of the `istio-ca-secret` Secret (in the default cluster). */
      readonly namespace: string;
      readonly secretName: string;
      readonly keyType: 'ec' | 'rsa';
      readonly rootTtlSeconds: number;
      /** How often the Secret is read again for a rotation (default 30 s: SELF_SIGNED_POLL_MS). */
      readonly pollIntervalMs?: number;
    }
  | { readonly kind: 'cacerts'; readonly dir: string; readonly pollIntervalMs?: number }
  | {
      /** The Kubernetes CSR API is the signer (signers/kubernetes-csr-signer.ts), in the default cluster. */
      readonly kind: 'kubernetes-csr';
      readonly signerName: string;
      /** Approve the CSRs it creates (needs `approve` on `signers/<signerName>`). */
      readonly autoApprove: boolean;
      /** PEM roots the signer's certificates chain to (what clients trust). */
      readonly rootsPem: string;
      /** The file they came from, re-read for a root rotation (signers/roots-file.ts). */
      readonly rootsFile?: string;
      /** How long to wait for a certificate (default 30 s). */
      readonly timeoutMs?: number;
    }
  | { readonly kind: 'custom'; readonly signer: Signer }
  | ({ readonly kind: 'step-ca' } & StepCaSettings)

  /** A registration authority: CSRs forwarded to an upstream IstioCertificateService (signers/upstream-signer.ts). */
  | ({ readonly kind: 'istio-upstream' } & UpstreamSignerSettings)
  /** An integrator's ES module (signer-module.ts), loaded with `loadSignerModule` (signers/module-signer.ts). */
  | ({ readonly kind: 'module' } & ModuleSignerSettings);

export interface CaServerConfig {
  /** host:port for gRPC; port 0 picks a free port. */
  readonly grpcHost: string;
  readonly grpcPort: number;
  /** Plaintext gRPC: only for loopback development, never the default; refused unless `grpcHost` is loopback. */
  readonly plaintext: boolean;
  /** Ops endpoint (/healthz, /readyz, /metrics); undefined = not served. */
  readonly opsHost?: string;
  readonly opsPort?: number;
  readonly trustDomain: string;
  readonly servingDnsNames: readonly string[];
  readonly defaultTtlSeconds: number;
  readonly maxTtlSeconds: number;
  readonly trustedNodeAccounts: readonly string[];
  /**
   * `ns/sa` of registration authorities (certbroker CAs with `--signer istio-upstream` pointed at
   * this CA): they may ask for any identity of the trust domain, with their token bound to their
   * own existing pod, without the node check (node-authorizer.ts). Default none.
   */
  readonly trustedRegistrationAuthorities?: readonly string[];
  /**
   * DNS names and IP literals a trusted node agent may have on its own SVID (the node broker's
   * Istio CA front serves TLS with it: serving-names.ts). Default DEFAULT_GRANTABLE_SERVING_NAMES
   * (localhost, 127.0.0.1, ::1); [] grants none.
   */
  readonly grantableServingNames?: readonly string[];
  readonly clusters: readonly ClusterConfig[];
  readonly defaultClusterId: string;
  readonly signer: SignerConfig;
  readonly tokenCacheSeconds: number;
  /** Refusals cached by token hash (default DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS; 0 = off). */
  readonly tokenNegativeCacheSeconds?: number;
  /** One TokenReview is abandoned after this long: ERR_CA_AUTHN_BACKEND (default TOKEN_REVIEW_TIMEOUT_MS, 5 s). */
  readonly tokenReviewTimeoutMs?: number;
  /** TokenReviews in flight at once per cluster; the others wait their turn (default DEFAULT_MAX_CONCURRENT_TOKEN_REVIEWS, 16). */
  readonly maxConcurrentTokenReviews?: number;
  /** Connection, stream and header bounds for unauthenticated clients (unset fields: DEFAULT_CA_LIMITS). */
  readonly limits?: Partial<CaLimits>;
  readonly signingWorkers: number;
  readonly shutdownGraceMs: number;
  /**
   * 'h2' (the default with TLS): CreateCertificate and health Check served directly on
   * certbroker's own HTTP/2 engine (src/h2), everything else (health Watch/List, reflection)
   * relayed to a loopback grpc-js server. 'http2': the same on node:http2 (nghttp2).
   * 'grpc-js' (the default with `plaintext`): everything on grpc-js. 'auto' or absent picks by
   * `plaintext`.
   */
  readonly transport?: 'auto' | 'grpc-js' | 'http2' | 'h2';
  /** The pod informers' watchdog, page size and backoff (src/kube defaults when absent). */
  readonly informer?: InformerSettings;
  readonly publish?: TrustBundlePublishConfig; // by the Lease holder (publish/publish-config.ts); absent = off (readCaConfig: on)
  readonly clock?: Clock;
  readonly logger?: Logger;
}

/** Options the CLI passes (flags win over env). */
export interface CaCliFlags extends StepCaFlags, PublishFlags {
  readonly grpcAddress?: string;
  readonly plaintext?: string;
  readonly opsAddress?: string;
  readonly trustDomain?: string;
  readonly signer?: string;
  readonly cacertsDir?: string;
  readonly kubeconfig?: string;
  readonly clusterId?: string;
  readonly k8sSignerName?: string;
  readonly k8sCsrAutoApprove?: string;
  readonly k8sCsrRootsFile?: string;
  readonly upstreamAddress?: string;
  readonly upstreamRootCertFile?: string;
  readonly upstreamTokenFile?: string;
  readonly upstreamClusterId?: string;
  readonly tokenReviewTimeoutSeconds?: string;
}

/** Everything `readCaConfig` reads except what needs the Kubernetes client (kubeconfig paths). */
export interface CaEnvConfig extends Omit<CaServerConfig, 'clusters' | 'signer' | 'clock' | 'logger' | 'limits' | 'tokenNegativeCacheSeconds' | 'tokenReviewTimeoutMs' | 'maxConcurrentTokenReviews'>, ExternalSignerEnv {
  readonly limits: CaLimits;
  readonly tokenNegativeCacheSeconds: number;
  readonly tokenReviewTimeoutMs: number;
  readonly maxConcurrentTokenReviews: number;
  readonly kubeconfigPath: string | undefined;
  readonly audiences: readonly string[];
  readonly tokenReview: boolean;
  readonly oidc?: { readonly issuer: string; readonly discoveryUrl?: string; readonly jwksUri?: string; readonly caFile?: string; readonly algorithms: readonly string[] };
  /** `id=kubeconfigPath` entries for remote clusters. */
  readonly remoteClusters: readonly { readonly id: string; readonly kubeconfigPath: string }[];
  readonly signerKind: 'self-signed' | 'cacerts' | 'kubernetes-csr' | 'step-ca' | 'istio-upstream' | 'module';
  /** The step-ca signer's settings (signerKind 'step-ca'). */
  readonly stepCa?: StepCaSettings;
  readonly cacertsDir: string;
  /** kubernetes-csr: the signerName, self-approval, the roots file and the wait for a certificate. */
  readonly k8sCsr: { readonly signerName: string; readonly autoApprove: boolean; readonly rootsFile: string; readonly timeoutMs: number } | undefined;
  readonly caNamespace: string;
  readonly selfSignedKey: 'ec' | 'rsa';
  readonly selfSignedRootTtlSeconds: number;
  readonly logLevel: LogLevel;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** True for `localhost`, 127.0.0.0/8 and ::1 (in any spelling, IPv4-mapped included). */
export function isLoopbackHost(host: string): boolean {
  if (host.toLowerCase() === 'localhost') return true;
  const family = isIP(host);
  return family !== 0 && LOOPBACK.check(host, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * Plaintext gRPC is for loopback development only: why serving it on `grpcHost` is refused, or
 * undefined when it is not plaintext or the host is loopback. `names` say how the two settings
 * were given (env vars, config fields).
 */
export function plaintextProblem(config: { readonly plaintext: boolean; readonly grpcHost: string }, names: { readonly plaintext: string; readonly host: string }): string | undefined {
  if (!config.plaintext || isLoopbackHost(config.grpcHost)) return undefined;
  return `${names.plaintext}=true (gRPC without TLS) is allowed only on a loopback address; ${names.host} ${JSON.stringify(config.grpcHost)} is not one (use 127.0.0.1, ::1 or localhost, or serve TLS)`;
}

/** The gRPC transport a configuration asks for ('auto' or absent: h2 with TLS, grpc-js in plaintext). */
export function transportKind(config: Pick<CaServerConfig, 'transport' | 'plaintext'>): 'grpc-js' | 'http2' | 'h2' {
  const kind = config.transport === undefined || config.transport === 'auto' ? (config.plaintext ? 'grpc-js' : 'h2') : config.transport;
  if (kind !== 'grpc-js' && config.plaintext) throw new Error(`the ${kind} transport serves TLS only; use the grpc-js transport for plaintext`);
  return kind;
}

/** Throws for what stops `startCaServer` before anything runs; returns the transport to start. */
export function checkServerConfig(config: CaServerConfig): 'grpc-js' | 'http2' | 'h2' {
  if (config.clusters.length > 0 && !config.clusters.some((c) => c.id === config.defaultClusterId)) {
    throw new Error(`default cluster ${config.defaultClusterId} is not among the configured clusters`);
  }
  const plaintextRefused = plaintextProblem(config, { plaintext: 'plaintext', host: 'grpcHost' });
  if (plaintextRefused) throw new ConfigError([plaintextRefused]);
  return transportKind(config);
}

function splitHostPort(raw: string, name: string, reader: ConfigReader): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]*):(\d+)$/.exec(raw);
  if (!m) {
    reader.problem(`${name}=${JSON.stringify(raw)} is not host:port`);
    return { host: '', port: 0 };
  }
  const port = Number(m[2]);
  if (port > 65535) reader.problem(`${name}=${raw} has a port above 65535`);
  return { host: (m[1] ?? '').replace(/^\[|\]$/g, '') || '0.0.0.0', port };
}

/** The kubernetes-csr settings (read always, so a stray one is still checked; required only for that signer). */
function readK8sCsr(r: ConfigReader, flags: CaCliFlags, wanted: boolean): CaEnvConfig['k8sCsr'] {
  const signerName = r.optionalString(ENV.K8S_SIGNER_NAME, flags.k8sSignerName);
  const rootsFile = r.optionalString(ENV.K8S_CSR_ROOTS_FILE, flags.k8sCsrRootsFile);
  const autoApprove = r.bool(ENV.K8S_CSR_AUTO_APPROVE, false, flags.k8sCsrAutoApprove);
  const timeoutMs = r.int(ENV.K8S_CSR_TIMEOUT_SECONDS, 30, { min: 1, max: 600 }) * 1000;
  const problem = signerName === undefined ? undefined : signerNameProblem(signerName);
  if (problem !== undefined) r.problem(`${ENV.K8S_SIGNER_NAME} (--k8s-signer-name) ${JSON.stringify(signerName)}: ${problem}`);
  if (!wanted) {
    if (signerName !== undefined || rootsFile !== undefined) r.problem(`${ENV.K8S_SIGNER_NAME}/${ENV.K8S_CSR_ROOTS_FILE} are for ${ENV.SIGNER}=kubernetes-csr only`);
    return undefined;
  }
  if (signerName === undefined) r.problem(`${ENV.SIGNER}=kubernetes-csr needs ${ENV.K8S_SIGNER_NAME} (--k8s-signer-name)`);
  if (rootsFile === undefined) r.problem(`${ENV.SIGNER}=kubernetes-csr needs ${ENV.K8S_CSR_ROOTS_FILE} (--k8s-csr-roots-file): the roots its certificates chain to`);
  return { signerName: signerName ?? '', autoApprove, rootsFile: rootsFile ?? '', timeoutMs };
}

export function readCaConfig(flags: CaCliFlags, env: Readonly<Record<string, string | undefined>> = process.env): CaEnvConfig {
  const r = new ConfigReader(env);
  const grpc = splitHostPort(r.string(ENV.GRPC_ADDRESS, '0.0.0.0:15012', flags.grpcAddress), ENV.GRPC_ADDRESS, r);
  const opsRaw = r.optionalString(ENV.OPS_ADDRESS, flags.opsAddress) ?? '0.0.0.0:15014';
  const ops = opsRaw === 'off' ? undefined : splitHostPort(opsRaw, ENV.OPS_ADDRESS, r);
  const defaultTtlSeconds = r.int(ENV.DEFAULT_TTL_SECONDS, DEFAULT_TTL_SECONDS, { min: 60 });
  const maxTtlSeconds = r.int(ENV.MAX_TTL_SECONDS, DEFAULT_MAX_TTL_SECONDS, { min: 60 });
  if (defaultTtlSeconds > maxTtlSeconds) r.problem(`${ENV.DEFAULT_TTL_SECONDS}=${defaultTtlSeconds} is above ${ENV.MAX_TTL_SECONDS}=${maxTtlSeconds}`);
  const trusted = r.accountList(ENV.TRUSTED_NODE_ACCOUNTS, DEFAULT_TRUSTED_NODE_ACCOUNTS);
  const trustedRegistrationAuthorities = r.accountList(ENV.TRUSTED_REGISTRATION_AUTHORITIES, []);
  const grantableServingNames = r.list(ENV.GRANTABLE_SERVING_NAMES, DEFAULT_GRANTABLE_SERVING_NAMES);
  for (const n of grantableServingNames) {
    const problem = servingNameProblem(n);
    if (problem !== undefined) r.problem(`${ENV.GRANTABLE_SERVING_NAMES} entry ${problem}`);
  }
  const external = readExternalSigner(r, ENV.SIGNER, flags);
  const signerKind = external.externalSigner?.kind ?? r.oneOf(ENV.SIGNER, ['self-signed', 'cacerts', 'kubernetes-csr', 'step-ca'] as const, 'self-signed', flags.signer);
  const k8sCsr = readK8sCsr(r, flags, signerKind === 'kubernetes-csr');
  const stepCa = signerKind === 'step-ca' ? readStepCaSettings(r, flags) : undefined;
  const cacertsDir = r.string(ENV.CACERTS_DIR, '/etc/cacerts', flags.cacertsDir);
  const issuer = r.optionalString(ENV.OIDC_ISSUER);
  const algorithms = r.list(ENV.JWT_ALGORITHMS, DEFAULT_JWT_ALGORITHMS);
  for (const p of jwtAlgorithmProblems(algorithms, ENV.JWT_ALGORITHMS)) r.problem(p);
  const remoteClusters: { id: string; kubeconfigPath: string }[] = [];
  for (const entry of r.list(ENV.REMOTE_CLUSTERS, [])) {
    const eq = entry.indexOf('=');
    if (eq <= 0 || eq === entry.length - 1) r.problem(`${ENV.REMOTE_CLUSTERS} entry ${JSON.stringify(entry)} is not id=/path/to/kubeconfig`);
    else remoteClusters.push({ id: entry.slice(0, eq), kubeconfigPath: entry.slice(eq + 1) });
  }
  const jwksUri = r.optionalString(ENV.OIDC_JWKS_URI);
  const discoveryUrl = r.optionalString(ENV.OIDC_DISCOVERY_URL);
  const oidcCaFile = r.optionalString(ENV.OIDC_CA_FILE);
  // An empty list would leave the audience unchecked somewhere down the line: refuse it here.
  const audiences = r.list(ENV.AUDIENCES, DEFAULT_AUDIENCES);
  if (audiences.length === 0) r.problem(`${ENV.AUDIENCES}=${JSON.stringify(r.raw(ENV.AUDIENCES))} names no audience`);
  const plaintext = r.bool(ENV.PLAINTEXT, false, flags.plaintext);
  const limits = readLimits(r);
  const caNamespace = r.string(ENV.CA_NAMESPACE, 'istio-system');
  const plaintextRefused = grpc.host === '' ? undefined : plaintextProblem({ plaintext, grpcHost: grpc.host }, { plaintext: ENV.PLAINTEXT, host: `${ENV.GRPC_ADDRESS} host` });
  if (plaintextRefused) r.problem(plaintextRefused);
  const cfg: CaEnvConfig = {
    grpcHost: grpc.host,
    grpcPort: grpc.port,
    plaintext,
    ...(ops ? { opsHost: ops.host, opsPort: ops.port } : {}),
    trustDomain: r.string(ENV.TRUST_DOMAIN, 'cluster.local', flags.trustDomain),
    servingDnsNames: r.list(ENV.SERVING_DNS_NAMES, DEFAULT_SERVING_DNS_NAMES),
    defaultTtlSeconds,
    maxTtlSeconds,
    trustedNodeAccounts: trusted,
    trustedRegistrationAuthorities,
    grantableServingNames,
    defaultClusterId: r.string(ENV.CLUSTER_ID, DEFAULT_CLUSTER_ID, flags.clusterId),
    tokenCacheSeconds: r.int(ENV.TOKEN_CACHE_SECONDS, 60, { min: 0, max: 3600 }),
    tokenNegativeCacheSeconds: r.int(ENV.TOKEN_NEGATIVE_CACHE_SECONDS, DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS, { min: 0, max: 300 }),
    tokenReviewTimeoutMs: r.int(ENV.TOKEN_REVIEW_TIMEOUT_SECONDS, TOKEN_REVIEW_TIMEOUT_MS / 1000, { min: 1, max: 60, explicit: flags.tokenReviewTimeoutSeconds }) * 1000,
    maxConcurrentTokenReviews: r.int(ENV.MAX_CONCURRENT_TOKEN_REVIEWS, DEFAULT_MAX_CONCURRENT_TOKEN_REVIEWS, { min: 1, max: 1024 }),
    limits,
    signingWorkers: r.int(ENV.WORKERS, DEFAULT_SIGNING_WORKERS, { min: 0, max: 64 }),
    transport: r.oneOf(ENV.TRANSPORT, ['auto', 'grpc-js', 'http2', 'h2'] as const, 'auto'),
    shutdownGraceMs: r.int(ENV.SHUTDOWN_SECONDS, 10, { min: 0, max: 600 }) * 1000,
    kubeconfigPath: r.optionalString(ENV.KUBECONFIG, flags.kubeconfig),
    audiences,
    tokenReview: r.bool(ENV.TOKEN_REVIEW, true),
    ...(issuer
      ? { oidc: { issuer, algorithms, ...(discoveryUrl ? { discoveryUrl } : {}), ...(jwksUri ? { jwksUri } : {}), ...(oidcCaFile ? { caFile: oidcCaFile } : {}) } }
      : {}),
    remoteClusters,
    signerKind,
    ...(stepCa ? { stepCa } : {}),
    ...external,
    cacertsDir,
    k8sCsr,
    caNamespace,
    ...publishSetting(readPublishConfig(r, flags, caNamespace, env)),
    selfSignedKey: r.oneOf(ENV.SELF_SIGNED_KEY, ['ec', 'rsa'] as const, 'ec'),
    selfSignedRootTtlSeconds: r.int(ENV.SELF_SIGNED_TTL_SECONDS, 10 * 365 * 24 * 3600, { min: 3600 }),
    logLevel: r.logLevel(ENV.LOG_LEVEL),
    informer: readInformerSettings(r),
  };
  r.done();
  return Object.freeze(cfg);
}
