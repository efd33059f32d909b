/**
 * The CA's readiness, driven by events. Each condition says what is wrong now (`problem()`) and
 * tells when that may have changed (`onChange`): the signer (material installed, closed, broken),
 * the serving certificate (issued, withdrawn at notAfter), each cluster's pod informer (synced,
 * gone stale, heard from again). The gate re-evaluates on those events only — no polling timer —
 * and publishes each transition (the gRPC health status). Reads (`ready`, the ops /readyz checks)
 * evaluate the conditions themselves, so they are never behind an event on its way.
 */
import type { Logger } from '../core/log.js';
import type { HealthService } from '../grpc/health.js';
import type { Check } from '../ops/ops-server.js';
import { WHOLE_SERVER } from '../protocol/grpc-health.js';
import { CA_SERVICE } from '../protocol/istio-ca.js';
import type { PodInformer } from './pod-informer.js';
import type { ServingIdentity } from './serving-identity.js';
import type { Signer } from './signer.js';

export interface ReadinessCondition {
  /** The /readyz check name. */
  readonly name: string;
  /** Undefined while fine; otherwise why the CA is not ready. */
  problem(): string | undefined;
  /** Calls `listener` when `problem()` may have changed; returns an unsubscribe function. */
  onChange(listener: () => void): () => void;
}

export class ReadinessGate {
  readonly #conditions: readonly ReadinessCondition[];
  readonly #publish: (ready: boolean) => void;
  readonly #logger: Logger;
  #published: boolean | undefined;
  #unsubscribe: Array<() => void> = [];

  constructor(options: { readonly conditions: readonly ReadinessCondition[]; readonly publish: (ready: boolean) => void; readonly logger: Logger }) {
    this.#conditions = options.conditions;
    this.#publish = options.publish;
    this.#logger = options.logger;
  }

  /** Every condition holds now (a transition not yet published is published on the way). */
  get ready(): boolean {
    return this.#evaluate();
  }

  /** The conditions as ops readiness checks. */
  checks(): Check[] {
    return this.#conditions.map((c) => ({ name: c.name, check: () => c.problem() }));
  }

  /** Follows the conditions' events from now on and publishes the current state. */
  start(): void {
    if (this.#unsubscribe.length > 0) return;
    this.#unsubscribe = this.#conditions.map((c) => c.onChange(() => this.#evaluate()));
    this.#evaluate();
  }

  stop(): void {
    for (const off of this.#unsubscribe.splice(0)) off();
  }

  #evaluate(): boolean {
    const ready = this.#conditions.every((c) => c.problem() === undefined);
    if (ready !== this.#published) {
      this.#published = ready;
      if (ready) this.#logger.info('CA ready');
      else this.#logger.info('CA not ready', { problems: this.#conditions.flatMap((c) => (c.problem() === undefined ? [] : [`${c.name}: ${c.problem()}`])) });
      this.#publish(ready);
    }
    return ready;
  }
}

/** The conditions of a CA: its signer, its serving certificate (with TLS), each cluster's pod index. */
export function caReadinessConditions(parts: {
  readonly signer: Signer;
  readonly serving?: ServingIdentity;
  readonly podIndexes: ReadonlyArray<{ readonly clusterId: string; readonly informer: PodInformer }>;
}): ReadinessCondition[] {
  const { signer, serving } = parts;
  return [
    { name: 'signer', problem: () => signer.notReadyReason, onChange: (l) => signer.onChange(l) },
    ...(serving ? [{ name: 'serving-certificate', problem: () => serving.problem(), onChange: (l: () => void) => serving.onChange(l) }] : []),
    ...parts.podIndexes.map(({ clusterId, informer }) => ({
      name: `pods-${clusterId}`,
      problem: () => informer.problem(),
      onChange: (l: () => void) => informer.onHealthChange(l),
    })),
  ];
}

/** Publishes readiness as the gRPC health of the whole server and of the CA service. */
export function healthPublisher(health: HealthService): (ready: boolean) => void {
  return (ready) => {
    const status = ready ? 'SERVING' : 'NOT_SERVING';
    health.setStatus(WHOLE_SERVER, status);
    health.setStatus(CA_SERVICE, status);
  };
}
