/**
 * One-shot timers on the injected `Clock`, many of them behind one sleep: a `TimerQueue` keeps
 * its armed `ClockTimer`s in a binary min-heap ordered by due time (ties: first armed first) and
 * holds a single `clock.sleep` for the earliest. The certificate manager keeps a refresh/retry
 * and an expiry timer per identity; with tens of thousands of identities one sleep (one
 * AbortController, promise and host timer) instead of one per timer is most of an entry's weight.
 *
 * A `ClockTimer` armed again replaces its previous arming; cancelled, nothing fires. Firing is
 * never synchronous with `arm` (also for a delay of 0): it happens when the clock's sleep ends.
 * A timer armed by a firing callback for "now" fires at the next wake, not in the same pass (a
 * callback re-arming itself at 0 cannot spin). Plain TypeScript.
 */
import type { Clock } from '../../core/clock.js';
import { siftDown, siftUp } from './binary-heap.js';

/** A Clock's sleep rejects only when cancelled: nothing to do. */
const cancelled = (): void => undefined;

export class TimerQueue {
  readonly #clock: Clock;
  readonly #heap: ClockTimer[] = [];
  #seq = 0;
  #sleep: AbortController | undefined;
  #wakeAt = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  get clock(): Clock {
    return this.#clock;
  }

  /** Timers armed. */
  get size(): number {
    return this.#heap.length;
  }

  /** @internal ClockTimer.arm: `timer` (not queued) fires at `due`. */
  add(timer: ClockTimer, due: number): void {
    timer.dueAt = due;
    timer.seq = this.#seq++;
    timer.index = this.#heap.length;
    this.#heap.push(timer);
    siftUp(this.#heap, timer.index, earlier, placeTimer);
    this.#schedule();
  }

  /** @internal ClockTimer.cancel: takes `timer` out if queued. */
  remove(timer: ClockTimer): void {
    const i = timer.index;
    if (i < 0) return;
    timer.index = -1;
    const last = this.#heap.pop()!;
    if (last !== timer) {
      this.#heap[i] = last;
      last.index = i;
      siftDown(this.#heap, i, earlier, placeTimer);
      siftUp(this.#heap, last.index, earlier, placeTimer);
    }
    if (this.#heap.length === 0) this.#cancelSleep();
  }

  /** One sleep, until the earliest timer is due; kept when it already ends no later. */
  #schedule(): void {
    const first = this.#heap[0];
    if (first === undefined) return this.#cancelSleep();
    if (this.#sleep !== undefined && this.#wakeAt <= first.dueAt) return;
    this.#cancelSleep();
    const sleep = new AbortController();
    this.#sleep = sleep;
    this.#wakeAt = first.dueAt;
    this.#clock.sleep(first.dueAt - this.#clock.now(), sleep.signal).then(() => {
      if (this.#sleep !== sleep) return;
      this.#sleep = undefined;
      this.#fireDue();
    }, cancelled);
  }

  #cancelSleep(): void {
    this.#sleep?.abort();
    this.#sleep = undefined;
  }

  /** Fires every timer due by now that was armed before this pass, earliest first. */
  #fireDue(): void {
    const now = this.#clock.now();
    const armedBefore = this.#seq;
    for (;;) {
      const top = this.#heap[0];
      if (top === undefined || top.dueAt > now || top.seq >= armedBefore) break;
      this.remove(top);
      const fire = top.fire!;
      top.fire = undefined;
      try {
        fire();
      } catch (err) {
        // As a throw in its own timer callback would: reported, the other timers still fire.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
    this.#schedule();
  }
}

function earlier(a: ClockTimer, b: ClockTimer): boolean {
  return a.dueAt < b.dueAt || (a.dueAt === b.dueAt && a.seq < b.seq);
}

function placeTimer(timer: ClockTimer, index: number): void {
  timer.index = index;
}

export class ClockTimer {
  readonly #queue: TimerQueue;
  /** @internal Position in the queue's heap, -1 while not armed. */
  index = -1;
  /** @internal When it fires (ms since epoch), while armed. */
  dueAt = 0;
  /** @internal Arming order, for ties. */
  seq = 0;
  /** @internal What runs when it fires. */
  fire: (() => void) | undefined = undefined;

  /** A timer in `queue` (shared by many timers), or alone on `clock`. */
  constructor(queue: TimerQueue | Clock) {
    this.#queue = queue instanceof TimerQueue ? queue : new TimerQueue(queue);
  }

  get armed(): boolean {
    return this.index >= 0;
  }

  /** When the armed timer fires (ms since epoch), undefined when none is armed. */
  get due(): number | undefined {
    return this.index >= 0 ? this.dueAt : undefined;
  }

  /** Runs `fire` after `delayMs` (negative = 0) unless cancelled or armed again first. */
  arm(delayMs: number, fire: () => void): void {
    this.#queue.remove(this);
    this.fire = fire;
    this.#queue.add(this, this.#queue.clock.now() + Math.max(0, delayMs));
  }

  cancel(): void {
    this.#queue.remove(this);
    this.fire = undefined;
  }
}
