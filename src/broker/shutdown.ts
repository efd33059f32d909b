/**
 * The broker's shutdown, in stages: first what takes work in (the Broker API drains its
 * streams within the deadline, the CNI socket closes, the pod watch and the token loop stop),
 * then what does the work (the certificate managers cancel their CA calls, the CA clients
 * close), last the ops endpoint (so `/readyz` and `/metrics` answer to the end). The parts of
 * a stage stop together; one that fails is logged and the others still stop. Runs once.
 */
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';

export type ShutdownStage = 'intake' | 'work' | 'ops';

const ORDER: readonly ShutdownStage[] = ['intake', 'work', 'ops'];

export type Stopper = (deadlineMs: number) => Promise<void> | void;

export class Shutdown {
  readonly #logger: Logger;
  readonly #parts = new Map<ShutdownStage, Array<{ readonly name: string; readonly stop: Stopper }>>(ORDER.map((s) => [s, []]));
  #run: Promise<void> | undefined;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Registers a part to stop in `stage` (a part started is registered right away). */
  add(stage: ShutdownStage, name: string, stop: Stopper): void {
    this.#parts.get(stage)!.push({ name, stop });
  }

  /** Stops everything registered, stage by stage; the same promise on every call. */
  run(deadlineMs: number): Promise<void> {
    this.#run ??= this.#stages(deadlineMs);
    return this.#run;
  }

  async #stages(deadlineMs: number): Promise<void> {
    for (const stage of ORDER) {
      const parts = this.#parts.get(stage)!;
      const outcomes = await Promise.allSettled(parts.map(async (p) => p.stop(deadlineMs)));
      outcomes.forEach((o, i) => {
        if (o.status === 'rejected') this.#logger.warn('a part failed to stop', { stage, part: parts[i]!.name, err: describeError(o.reason) });
      });
    }
  }
}
