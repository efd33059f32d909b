/**
 * What a signing controller of `certbroker k8s-signer` is and what it gets: one controller per
 * Kubernetes API it signs for (CertificateSigningRequests: csr-controller.ts; others join in
 * k8s-signer.ts's CONTROLLERS). Each is a `LongLived` (start(signal)/stop(deadline)) with a
 * readiness answer; all of them share the plug-in CA, the signer name and trust domain, the
 * kube client, the clock and the metrics registry.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { Signer } from '../ca/index.js';
import type { Clock } from '../core/clock.js';
import type { LongLived } from '../core/long-lived.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import type { InformerSettings } from '../kube/index.js';

export interface SignerControllerContext {
  readonly kubeConfig: KubeConfig;
  /** The signerName this process signs for (`example.com/spiffe`). */
  readonly signerName: string;
  readonly trustDomain: string;
  /** The plug-in CA (cacerts directory or Secret): issues leaves, knows its roots. */
  readonly ca: Signer;
  /** Leaf lifetime when a request names none, and the most any request gets (seconds). */
  readonly defaultTtlSeconds: number;
  readonly maxTtlSeconds: number;
  /** Users who may get DNS/IP serving certificates (csr-policy.ts). */
  readonly servingRequesters: readonly string[];
  readonly informer: InformerSettings;
  readonly registry: Registry;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
}

export interface SignerController extends LongLived {
  /** For logs, readiness check names and metrics labels ("csr"). */
  readonly name: string;
  /** Undefined while the controller's view of its API is trustworthy (synced, not stale); else why not. */
  problem(): string | undefined;
}

export type SignerControllerFactory = (ctx: SignerControllerContext) => SignerController;
