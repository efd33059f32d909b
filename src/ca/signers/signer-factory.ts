/**
 * Configuration -> `Signer`: the one place that knows every kind of signer the CA can run.
 * Each kind is one case below building the signer and saying how it starts; a new backend
 * (step-ca, an upstream Istio CA, a module) is one more `SignerConfig` variant
 * and one more case. `custom` takes a signer built by the caller (src/index.ts: integrators).
 */
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/log.js';
import type { ClusterConfig, SignerConfig } from '../config.js';
import type { Signer } from '../signer.js';
import type { InformerSettings } from '../../kube/index.js';
import { kubeCaSecretStore } from './ca-secret-store.js';
import { KubernetesCsrSigner } from './kubernetes-csr-signer.js';
import { CacertsSigner } from './cacerts-signer.js';
import type { MaterialSignerOptions } from './material-signer.js';
import { poolIssuerFactory } from './pool-issuer.js';
import { SelfSignedSigner } from './self-signed-signer.js';
import { StepCaSigner } from './step-ca-signer.js';
import { ModuleSigner } from './module-signer.js';
import { IstioUpstreamSigner } from './upstream-signer.js';

/** What building a signer may need from the rest of the CA's configuration. */
export interface SignerContext {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly trustDomain: string;
  readonly maxTtlSeconds: number;
  /** Signing worker threads (0: sign on the main thread). */
  readonly signingWorkers: number;
  /** The default cluster (where the self-signed root's Secret lives), when there is one. */
  readonly defaultCluster: ClusterConfig | undefined;
  /** The informers' watchdog and page size (the kubernetes-csr signer's CSR watch). */
  readonly informer?: InformerSettings | undefined;
}

/** A signer and how to start it: resolves once it is loaded, or (cacerts) has tried once and keeps watching. */
export interface StartableSigner {
  readonly signer: Signer;
  start(): Promise<void>;
}

function materialOptions(ctx: SignerContext): MaterialSignerOptions {
  return {
    clock: ctx.clock,
    logger: ctx.logger,
    maxTtlSeconds: ctx.maxTtlSeconds,
    ...(ctx.signingWorkers > 0 ? { issuerFactory: poolIssuerFactory(ctx.signingWorkers) } : {}),
  };
}

export function createSigner(config: SignerConfig, ctx: SignerContext): StartableSigner {
  switch (config.kind) {
    case 'self-signed': {
      if (!ctx.defaultCluster) throw new Error('the self-signed signer needs a cluster to keep its Secret in');
      const signer = new SelfSignedSigner({
        ...materialOptions(ctx),
        store: kubeCaSecretStore({ kubeConfig: ctx.defaultCluster.kubeConfig, namespace: config.namespace, name: config.secretName }),
        trustDomain: ctx.trustDomain,
        keyType: config.keyType,
        rootTtlSeconds: config.rootTtlSeconds,
        ...(config.pollIntervalMs !== undefined ? { pollIntervalMs: config.pollIntervalMs } : {}),
      });
      return { signer, start: () => signer.start() };
    }
    case 'cacerts': {
      const signer = new CacertsSigner({ ...materialOptions(ctx), dir: config.dir, ...(config.pollIntervalMs !== undefined ? { pollIntervalMs: config.pollIntervalMs } : {}) });
      return { signer, start: () => signer.start() };
    }
    case 'kubernetes-csr': {
      if (!ctx.defaultCluster) throw new Error('the kubernetes-csr signer needs a cluster to create its CertificateSigningRequests in');
      const signer = new KubernetesCsrSigner({
        kubeConfig: ctx.defaultCluster.kubeConfig,
        signerName: config.signerName,
        autoApprove: config.autoApprove,
        rootsPem: config.rootsPem,
        ...(config.rootsFile !== undefined ? { rootsFile: config.rootsFile } : {}),
        ...(config.timeoutMs !== undefined ? { timeoutMs: config.timeoutMs } : {}),
        ...(ctx.informer ? { informer: ctx.informer } : {}),
        clock: ctx.clock,
        logger: ctx.logger,
      });
      return { signer, start: () => signer.start() };
    }
    case 'custom':
      return { signer: config.signer, start: async () => undefined };
    case 'step-ca': {
      const { kind: _kind, ...settings } = config;
      const signer = new StepCaSigner({ ...settings, clock: ctx.clock, logger: ctx.logger });
      return { signer, start: () => signer.start() };
    }
    case 'istio-upstream': {
      const { kind: _, ...settings } = config;
      const signer = new IstioUpstreamSigner({ ...settings, clock: ctx.clock, logger: ctx.logger });
      return { signer, start: () => signer.start() };
    }
    case 'module': {
      const { kind: _, ...settings } = config;
      const signer = new ModuleSigner({ ...settings, clock: ctx.clock, logger: ctx.logger });
      return { signer, start: () => signer.start() };
    }
    default: {
      const unknown: never = config;
      throw new Error(`unknown signer kind ${JSON.stringify((unknown as { kind?: unknown }).kind)}`);
    }
  }
}
