/**
 * One run of a task at a time, calls coalesced: `run()` starts the task, or — while a run is in
 * progress — joins it and has the task run once more when it finishes, so every caller waits for
 * a run that started after its call (a burst of calls costs two runs, not one per call). No
 * re-run once `stopped()` says so.
 */
export class CoalescedRun {
  readonly #task: () => Promise<void>;
  readonly #stopped: () => boolean;
  #running: Promise<void> | undefined;
  #again = false;

  constructor(task: () => Promise<void>, stopped: () => boolean = () => false) {
    this.#task = task;
    this.#stopped = stopped;
  }

  /** The run in progress (re-runs included), undefined when none is. */
  get running(): Promise<void> | undefined {
    return this.#running;
  }

  run(): Promise<void> {
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#running = (async () => {
      do {
        this.#again = false;
        await this.#task();
      } while (this.#again && !this.#stopped());
    })().finally(() => (this.#running = undefined));
    return this.#running;
  }
}
