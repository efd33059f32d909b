/**
 * Trust-bundle publication settings of the CA (`readPublishConfig`: env and flags through the
 * CA's ConfigReader, every problem listed with the rest of the CA's):
 *
 * | env | default | |
 * |---|---|---|
 * | `CA_PUBLISH_TRUST_BUNDLE` (`--[no-]publish-trust-bundle`) | true | publish at all |
 * | `CA_PUBLISH_SKIP_NAMESPACES` | kube-public,kube-node-lease,local-path-storage | namespaces without the ConfigMap (istiod's list; kube-system is served, for ztunnel) |
 * | `CA_PUBLISH_CLUSTER_TRUST_BUNDLE` | true | also the ClusterTrustBundle |
 * | `CA_TRUST_BUNDLE_SIGNER_NAME` (`--trust-bundle-signer-name`) | istio.io/istiod-ca | its signer (named `<signer with / as :>:root-cert`) |
 * | `CA_LEADER_ELECTION_LEASE` | certbroker-ca-publisher | the Lease in `CA_NAMESPACE` electing the one writer |
 * | `CA_LEADER_LEASE_DURATION_SECONDS` / `_RENEW_DEADLINE_SECONDS` / `_RETRY_PERIOD_SECONDS` | 15 / 10 / 2 | client-go's timings and rules |
 * | `POD_NAME` | the host name | the candidate identity (a random suffix is added) |
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { ConfigReader } from '../../core/config.js';
import { signerNameProblem } from '../../core/signer-name.js';
import { LEADER_ELECTION_DEFAULTS, leaderElectionProblems, type LeaderElectionSettings } from '../../kube/leader-election-settings.js';

export interface TrustBundlePublishConfig {
  /** Namespaces that get no `istio-ca-root-cert` ConfigMap. */
  readonly skipNamespaces: readonly string[];
  /** Signer of the ClusterTrustBundle; undefined = none is published. */
  readonly clusterTrustBundleSignerName?: string;
  /** Where the Lease lives (the CA's namespace) and its name. */
  readonly leaseNamespace: string;
  readonly leaseName: string;
  /** This replica's holder identity (unique per process). */
  readonly identity: string;
  readonly election: LeaderElectionSettings;
}

export const PUBLISH_ENV = Object.freeze({
  PUBLISH: 'CA_PUBLISH_TRUST_BUNDLE',
  SKIP_NAMESPACES: 'CA_PUBLISH_SKIP_NAMESPACES',
  CLUSTER_TRUST_BUNDLE: 'CA_PUBLISH_CLUSTER_TRUST_BUNDLE',
  SIGNER_NAME: 'CA_TRUST_BUNDLE_SIGNER_NAME',
  LEASE: 'CA_LEADER_ELECTION_LEASE',
  LEASE_DURATION_SECONDS: 'CA_LEADER_LEASE_DURATION_SECONDS',
  RENEW_DEADLINE_SECONDS: 'CA_LEADER_RENEW_DEADLINE_SECONDS',
  RETRY_PERIOD_SECONDS: 'CA_LEADER_RETRY_PERIOD_SECONDS',
  POD_NAME: 'POD_NAME',
});

/** istiod's namespace controller skips these (inject.IgnoredNamespaces without kube-system). */
export const DEFAULT_SKIP_NAMESPACES: readonly string[] = ['kube-public', 'kube-node-lease', 'local-path-storage'];
/** istiod's ClusterTrustBundle signer, so consumers of Istio's bundle find ours. */
export const DEFAULT_TRUST_BUNDLE_SIGNER_NAME = 'istio.io/istiod-ca';
export const DEFAULT_PUBLISHER_LEASE = 'certbroker-ca-publisher';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export interface PublishFlags {
  readonly publishTrustBundle?: string;
  readonly trustBundleSignerName?: string;
}

/** The publication settings, or undefined when publication is off; problems go to `r`. */
export function readPublishConfig(r: ConfigReader, flags: PublishFlags, caNamespace: string, env: Readonly<Record<string, string | undefined>>): TrustBundlePublishConfig | undefined {
  const on = r.bool(PUBLISH_ENV.PUBLISH, true, flags.publishTrustBundle);
  const skipNamespaces = r.list(PUBLISH_ENV.SKIP_NAMESPACES, DEFAULT_SKIP_NAMESPACES);
  for (const ns of skipNamespaces) if (!DNS_LABEL.test(ns) || ns.length > 63) r.problem(`${PUBLISH_ENV.SKIP_NAMESPACES} entry ${JSON.stringify(ns)} is not a namespace name`);
  const withBundle = r.bool(PUBLISH_ENV.CLUSTER_TRUST_BUNDLE, true);
  const signerName = r.string(PUBLISH_ENV.SIGNER_NAME, DEFAULT_TRUST_BUNDLE_SIGNER_NAME, flags.trustBundleSignerName);
  const badSigner = signerNameProblem(signerName);
  if (badSigner !== undefined) r.problem(`${PUBLISH_ENV.SIGNER_NAME}=${JSON.stringify(signerName)}: ${badSigner}`);
  const leaseName = r.string(PUBLISH_ENV.LEASE, DEFAULT_PUBLISHER_LEASE);
  if (!DNS_SUBDOMAIN.test(leaseName) || leaseName.length > 253) r.problem(`${PUBLISH_ENV.LEASE}=${JSON.stringify(leaseName)} is not a valid object name`);
  const seconds = (name: string, fallbackMs: number) => r.int(name, fallbackMs / 1000, { min: 1, max: 3600 }) * 1000;
  const election: LeaderElectionSettings = {
    leaseDurationMs: seconds(PUBLISH_ENV.LEASE_DURATION_SECONDS, LEADER_ELECTION_DEFAULTS.leaseDurationMs),
    renewDeadlineMs: seconds(PUBLISH_ENV.RENEW_DEADLINE_SECONDS, LEADER_ELECTION_DEFAULTS.renewDeadlineMs),
    retryPeriodMs: seconds(PUBLISH_ENV.RETRY_PERIOD_SECONDS, LEADER_ELECTION_DEFAULTS.retryPeriodMs),
  };
  for (const p of leaderElectionProblems(election, {
    leaseDurationMs: PUBLISH_ENV.LEASE_DURATION_SECONDS,
    renewDeadlineMs: PUBLISH_ENV.RENEW_DEADLINE_SECONDS,
    retryPeriodMs: PUBLISH_ENV.RETRY_PERIOD_SECONDS,
  }, (ms) => String(ms / 1000))) r.problem(p);
  if (!on) return undefined;
  const pod = env[PUBLISH_ENV.POD_NAME] || hostname();
  return Object.freeze({
    skipNamespaces,
    ...(withBundle ? { clusterTrustBundleSignerName: signerName } : {}),
    leaseNamespace: caNamespace,
    leaseName,
    identity: `${pod}_${randomUUID()}`,
    election,
  });
}

/** `{ publish }` when publication is on, `{}` when off (spread into the CA's configuration). */
export function publishSetting(publish: TrustBundlePublishConfig | undefined): { readonly publish?: TrustBundlePublishConfig } {
  return publish ? { publish } : {};
}
