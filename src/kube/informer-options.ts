/** What an `Informer` is given (src/kube/informer.ts): what to list and watch, where to keep it, and its timings. */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import type { InformerHandlers, InformerStore } from './informer-cache.js';
import type { InformerSettings } from './informer-settings.js';
import type { PageReader } from './list-page.js';

export interface Selectors {
  readonly fieldSelector?: string;
  readonly labelSelector?: string;
}

export interface InformerOptions<T> extends Selectors, InformerHandlers<T>, InformerSettings {
  readonly kubeConfig: KubeConfig;
  /** Collection path, e.g. `/api/v1/pods` or `/api/v1/namespaces/x/pods`. */
  readonly path: string;
  /** Name in logs and metrics (default: the last segment of `path`). */
  readonly resource?: string;
  /** Applied to every object before it is cached and handed to the callbacks (keep metadata). */
  readonly transform?: (obj: T) => T;
  /**
   * Keeps the listed and watched objects instead of the default cache (which runs `transform`
   * and the callbacks); `what` names the watch in errors.
   */
  readonly store?: (what: string) => InformerStore<T>;
  /** Reads each list page's response (default: JSON.parse of the whole page). */
  readonly readPage?: PageReader<T>;
  readonly clock?: Clock;
  readonly rng?: Rng;
  readonly logger?: Logger;
}
