/**
 * `certbroker k8s-signer`'s wiring, and nothing else: the plug-in CA (the CA's `CacertsSigner`,
 * reloaded on change), one signing controller per configured API (CONTROLLERS), the metrics
 * registry and the ops endpoint (/healthz: the CA can still sign; /readyz: the CA is loaded and
 * every controller's watch is synced and fresh). A new API the signer serves is one more entry in
 * CONTROLLERS (and in config.ts's CONTROLLER_NAMES) with its own controller file.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { CacertsSecretSigner, CacertsSigner, type Signer } from '../ca/index.js';
import { systemClock, type Clock } from '../core/clock.js';
import { settleWithin, stopOnAbort, type Stoppable } from '../core/long-lived.js';
import { silentLogger, type Logger } from '../core/log.js';
import { systemRng, type Rng } from '../core/rng.js';
import { startOpsServer, type OpsServer } from '../ops/ops-server.js';
import { collectProcessMetrics } from '../ops/process-metrics.js';
import type { ControllerName, K8sSignerConfig } from './config.js';
import type { SignerController, SignerControllerFactory } from './controller.js';
import { csrController } from './csr-controller.js';
import { pcrController } from './pcr-controller.js';

/** One factory per controller name. */
export const CONTROLLERS: Readonly<Record<ControllerName, SignerControllerFactory>> = Object.freeze({
  csr: csrController,
  pcr: pcrController,
});

export interface K8sSignerOptions {
  readonly config: K8sSignerConfig;
  readonly kubeConfig: KubeConfig;
  /** The plug-in CA; default: `config.cacertsSecret` through the API, else a CacertsSigner on `config.cacertsDir` (started and closed here). */
  readonly ca?: Signer & { start?(): Promise<void> };
  readonly clock?: Clock;
  readonly rng?: Rng;
  readonly logger?: Logger;
  readonly signal?: AbortSignal;
  /** Also export Node's process metrics (the process, not in-process test stacks). */
  readonly processMetrics?: boolean;
}

export interface K8sSigner extends Stoppable {
  readonly ca: Signer;
  readonly controllers: readonly SignerController[];
  readonly registry: Registry;
  /** The ops endpoint's port, when served. */
  readonly opsPort: number | undefined;
  /** Undefined when ready; otherwise the first problem (CA not loaded, a controller not synced). */
  problem(): string | undefined;
}

/** How long `stop()` waits by default. */
export const K8S_SIGNER_STOP_DEADLINE_MS = 5000;

export async function startK8sSigner(options: K8sSignerOptions): Promise<K8sSigner> {
  const { config } = options;
  const clock = options.clock ?? systemClock;
  const logger = (options.logger ?? silentLogger).child({ component: 'k8s-signer' });
  const registry = new Registry();
  if (options.processMetrics) collectProcessMetrics(registry);
  const ownCa = options.ca === undefined;
  const material = { clock, logger, maxTtlSeconds: config.maxTtlSeconds };
  const ca =
    options.ca ??
    (config.cacertsSecret
      ? new CacertsSecretSigner({ ...material, kubeConfig: options.kubeConfig, ...config.cacertsSecret, informer: config.informer })
      : new CacertsSigner({ ...material, dir: config.cacertsDir }));
  const controllers = config.controllers.map((name) =>
    CONTROLLERS[name]({
      kubeConfig: options.kubeConfig,
      signerName: config.signerName,
      trustDomain: config.trustDomain,
      ca,
      defaultTtlSeconds: config.defaultTtlSeconds,
      maxTtlSeconds: config.maxTtlSeconds,
      servingRequesters: config.servingRequesters,
      informer: config.informer,
      registry,
      clock,
      rng: options.rng ?? systemRng,
      logger: logger.child({ controller: name }),
    }),
  );
  const problem = () => {
    if (ca.notReadyReason !== undefined) return `ca: ${ca.notReadyReason}`;
    for (const c of controllers) {
      const p = c.problem();
      if (p !== undefined) return `${c.name}: ${p}`;
    }
    return undefined;
  };
  let ops: OpsServer | undefined;
  const stopAll = async (deadlineMs: number) => {
    await settleWithin(Promise.all(controllers.map((c) => c.stop(deadlineMs))), deadlineMs);
    if (ownCa) await ca.close();
    await ops?.stop();
  };
  try {
    if (config.ops) {
      ops = await startOpsServer({
        host: config.ops.host,
        port: config.ops.port,
        registry,
        liveness: [{ name: 'ca', check: () => ca.brokenReason }],
        readiness: [{ name: 'ca', check: () => ca.notReadyReason }, ...controllers.map((c) => ({ name: c.name, check: () => c.problem() }))],
        logger,
      });
    }
    await ca.start?.();
    for (const c of controllers) await c.start();
  } catch (err) {
    await stopAll(K8S_SIGNER_STOP_DEADLINE_MS);
    throw err;
  }
  logger.info('k8s-signer running', { signerName: config.signerName, trustDomain: config.trustDomain, controllers: config.controllers, ca: ca.description });
  let stopped: Promise<void> | undefined;
  const stop = (deadlineMs = K8S_SIGNER_STOP_DEADLINE_MS) => (stopped ??= stopAll(deadlineMs));
  stopOnAbort(options.signal, () => stop());
  return { ca, controllers, registry, opsPort: ops?.port, problem, stop };
}
