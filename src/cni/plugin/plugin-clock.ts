/**
 * The plugin's clock: unlike `systemClock`, whose timers are unref'd for long-lived daemons, a
 * retry wait here must keep this short-lived process alive.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Clock } from '../../core/clock.js';

export const pluginClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) => delay(Math.max(0, ms), undefined, signal ? { signal } : {}),
};
