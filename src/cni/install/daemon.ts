/**
 * The install-cni daemon: installs the plugin, then keeps it installed. It reacts to changes
 * in the CNI config dir, its binaries' dir, the kubeconfig's dir and the service-account
 * token's dir (fs.watch), and re-checks everything on a periodic resync in case a watch event
 * was missed. Work is serialised: events only mark the state dirty and wake one loop.
 *
 * Readiness is state the loop keeps, not a probe-time check: each time the loop wakes (a watch
 * event, the resync) it re-checks what is on disk once and publishes the answer, and again after
 * each install pass; /readyz only reads the published answer, so probes do no filesystem work.
 *
 * On abort it decides, through its `ShutdownAdvisor`, whether this is an upgrade (leave the
 * plugin in place) or an uninstall (remove the entry, kubeconfig and binaries).
 *
 * Lifecycle (src/core/long-lived.ts): `start(signal)` removes stale temp files, arms the watchers
 * and starts the loop; aborting `signal` or `stop(deadlineMs)` ends it, and `stopped` resolves once
 * the shutdown (upgrade check, uninstall) is done. `run(signal)` is both: start, then wait.
 */
import { watch, type FSWatcher } from 'node:fs';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { settleWithin, stopOnAbort, type LongLived } from '../../core/long-lived.js';
import type { InstallConfig } from './config.js';
import { FightDetector } from './fight-detector.js';
import { Installer } from './installer.js';
import type { ShutdownAdvisor } from './shutdown-advisor.js';

export interface InstallDaemonOptions {
  readonly config: InstallConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly registry: Registry;
  readonly shutdownAdvisor: ShutdownAdvisor;
  /** Quiet time after a watch event before reconciling (coalesces bursts). */
  readonly debounceMs?: number;
}

/**
 * How long `stop()` waits by default for the loop and the shutdown: the upgrade check (bounded at
 * 5 s by install-cni's advisor) and the uninstall, with margin.
 */
export const DAEMON_STOP_DEADLINE_MS = 10_000;

export type DaemonPhase = 'starting' | 'waiting-for-primary' | 'installed' | 'error' | 'stopped';

interface Metrics {
  readonly ready: Gauge;
  readonly repairs: Counter<'object'>;
  readonly kubeconfigWrites: Counter;
  readonly errors: Counter;
  readonly fights: Counter<'object'>;
  readonly conflicts: Counter<'file'>;
}

function makeMetrics(registry: Registry): Metrics {
  return {
    ready: new Gauge({ name: 'certbroker_install_cni_ready', help: '1 while the plugin is installed and valid', registers: [registry] }),
    repairs: new Counter({
      name: 'certbroker_install_cni_repairs_total',
      help: 'Objects put back after another component removed or rewrote them',
      labelNames: ['object'],
      registers: [registry],
    }),
    kubeconfigWrites: new Counter({
      name: 'certbroker_install_cni_kubeconfig_writes_total',
      help: 'Plugin kubeconfig writes (first install and token rotations)',
      registers: [registry],
    }),
    errors: new Counter({ name: 'certbroker_install_cni_reconcile_errors_total', help: 'Failed reconcile passes', registers: [registry] }),
    fights: new Counter({
      name: 'certbroker_install_cni_fight_warnings_total',
      help: 'Times another writer kept undoing our changes',
      labelNames: ['object'],
      registers: [registry],
    }),
    conflicts: new Counter({
      name: 'certbroker_install_cni_config_conflicts_total',
      help: 'Compare-and-swap retries: the CNI config changed between our read and our rename, so nothing was written over it',
      labelNames: ['file'],
      registers: [registry],
    }),
  };
}

export class InstallDaemon implements LongLived {
  readonly #o: InstallDaemonOptions;
  readonly #installer: Installer;
  readonly #metrics: Metrics;
  readonly #fights: FightDetector;
  #phase: DaemonPhase = 'starting';
  #lastError: string | undefined;
  #dirty = true;
  #wake: (() => void) | undefined;
  #installedOnce = false;
  #watchers: FSWatcher[] = [];
  readonly #stop = new AbortController();
  /** The preparation (stale temps), then the loop and the shutdown after it, once started. */
  #running: Promise<void> | undefined;
  #prepared: Promise<void> | undefined;
  /** What /readyz answers: undefined = ready; set only by `#publishReadiness`. */
  #readiness: string | undefined = 'not installed yet (starting)';

  constructor(options: InstallDaemonOptions) {
    this.#o = options;
    this.#metrics = makeMetrics(options.registry);
    this.#installer = new Installer(options.config, {
      now: () => options.clock.now(),
      events: {
        conflict: (file, reason) => {
          this.#metrics.conflicts.inc({ file });
          options.logger.debug('CNI config changed while we chained into it; reading it again', { file, reason });
        },
        gaveUpWaiting: (file, reason) => {
          options.logger.warn('stopped waiting for the primary CNI config; the next valid file is now the primary', {
            file,
            reason,
            waitedSeconds: options.config.primaryConfigWaitSeconds,
          });
        },
      },
    });
    this.#fights = new FightDetector({
      windowMs: options.config.fightWindowSeconds * 1000,
      threshold: options.config.fightThreshold,
      now: () => options.clock.now(),
    });
  }

  get phase(): DaemonPhase {
    return this.#phase;
  }

  get installer(): Installer {
    return this.#installer;
  }

  /** For /readyz: undefined when the plugin was installed and valid at the loop's last check. */
  readinessProblem(): string | undefined {
    return this.#readiness;
  }

  /** Looks at what is in place now (files on disk) and publishes it as the readiness. */
  #recheckReadiness(): void {
    let problem: string | undefined;
    if (this.#phase === 'stopped') problem = 'stopped';
    else if (!this.#installedOnce) problem = this.#lastError ?? `not installed yet (${this.#phase})`;
    else problem = this.#installer.problem();
    this.#publishReadiness(problem);
  }

  #publishReadiness(problem: string | undefined): void {
    const was = this.#readiness;
    this.#readiness = problem;
    this.#metrics.ready.set(problem === undefined ? 1 : 0);
    if (problem === undefined && was !== undefined) this.#o.logger.info('install-cni ready');
    else if (problem !== undefined && was === undefined) this.#o.logger.warn('install-cni not ready', { reason: problem });
  }

  /** For /healthz: the loop is alive (errors are retried, not fatal). */
  livenessProblem(): string | undefined {
    return this.#phase === 'stopped' ? 'stopped' : undefined;
  }

  /** Runs until `signal` aborts (or `stop()`), then cleans up as the shutdown advisor says. */
  async run(signal?: AbortSignal): Promise<void> {
    await this.start(signal);
    await this.stopped;
  }

  /**
   * Removes stale temp files, arms the watchers and starts the loop (idempotent); resolves once
   * the loop runs. Aborting `signal` stops it as `stop()` does; after `stop()` it does nothing.
   */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#running === undefined && !this.#stop.signal.aborted) {
      stopOnAbort(signal, () => this.#stop.abort(signal?.reason));
      this.#prepared = this.#prepare();
      this.#running = this.#prepared.then(() => this.#loop(this.#stop.signal));
      // `start` (and `run`) report a failed preparation; `stopped` still rejects for whoever awaits it.
      this.#running.catch(() => undefined);
    }
    await this.#prepared;
  }

  async #prepare(): Promise<void> {
    const stale = await this.#installer.removeStaleTemps();
    if (stale.length > 0) this.#o.logger.info('removed stale temp files', { files: stale });
  }

  /** Resolves once the loop ended and the shutdown (upgrade check, uninstall) is done; at once when never started. */
  get stopped(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  /** Ends the loop and the watchers, then shuts down; resolves when done or after `deadlineMs`. */
  async stop(deadlineMs = DAEMON_STOP_DEADLINE_MS): Promise<void> {
    this.#stop.abort();
    await settleWithin(this.stopped, deadlineMs);
  }

  async #loop(signal: AbortSignal): Promise<void> {
    this.#startWatchers();
    const resync = this.#resyncLoop(signal);
    try {
      while (!signal.aborted) {
        if (!this.#dirty) await this.#sleepUntilDirty(signal);
        if (signal.aborted) break;
        // Something changed (or the resync came round): readiness says so before the debounce.
        this.#recheckReadiness();
        await this.#o.clock.sleep(this.#o.debounceMs ?? 50, signal).catch(() => undefined);
        if (signal.aborted) break;
        this.#dirty = false;
        await this.#reconcile();
        this.#recheckReadiness();
        this.#o.logger.debug('install pass done', { phase: this.#phase, ready: this.#readiness === undefined });
      }
    } finally {
      this.#stopWatchers();
      await resync;
      this.#phase = 'stopped';
      this.#publishReadiness('stopped');
      await this.#shutdown();
    }
  }

  /** Marks the state dirty and wakes the loop (watch events, resync, tests). */
  poke(): void {
    this.#dirty = true;
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  #sleepUntilDirty(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.#wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  async #resyncLoop(signal: AbortSignal): Promise<void> {
    const ms = this.#o.config.resyncIntervalSeconds * 1000;
    while (!signal.aborted) {
      try {
        await this.#o.clock.sleep(ms, signal);
      } catch {
        return;
      }
      if (this.#watchers.length < this.#watchedDirs().length) {
        this.#stopWatchers();
        this.#startWatchers();
      }
      this.poke();
    }
  }

  #watchedDirs(): string[] {
    const c = this.#o.config;
    return [...new Set([c.mountedCniNetDir, c.mountedCniBinDir, c.mountedCniAgentRunDir, c.serviceAccountDir])];
  }

  #startWatchers(): void {
    for (const dir of this.#watchedDirs()) {
      try {
        const w = watch(dir, { persistent: false }, () => this.poke());
        w.on('error', (err) => {
          this.#o.logger.warn('watch failed; relying on resync', { dir, err: describeError(err) });
          w.close();
          this.#watchers = this.#watchers.filter((x) => x !== w);
        });
        this.#watchers.push(w);
      } catch (err) {
        // The dir may not exist yet (created on first install); the resync re-arms watchers.
        this.#o.logger.debug('cannot watch dir yet', { dir, err: describeError(err) });
      }
    }
  }

  #stopWatchers(): void {
    for (const w of this.#watchers) w.close();
    this.#watchers = [];
  }

  #noteRepair(object: string): void {
    this.#metrics.repairs.inc({ object });
    const count = this.#fights.record(object);
    if (count !== undefined) {
      this.#metrics.fights.inc({ object });
      this.#o.logger.warn('fighting another writer: it keeps undoing our change', {
        object,
        repairs: count,
        windowSeconds: this.#o.config.fightWindowSeconds,
        hint: 'another component (often the primary CNI) rewrites this file; see docs/operations.md',
      });
    }
  }

  async #reconcile(): Promise<void> {
    const { logger } = this.#o;
    try {
      const copied = await this.#installer.ensureBinaries();
      for (const name of copied) {
        if (this.#installedOnce) {
          logger.warn('binary was removed or replaced; restored', { binary: name });
          this.#noteRepair(`binary:${name}`);
        } else {
          logger.info('binary installed', { binary: name });
        }
      }
      if (await this.#installer.ensureKubeconfig()) {
        this.#metrics.kubeconfigWrites.inc();
        logger.info(this.#installedOnce ? 'plugin kubeconfig rewritten' : 'plugin kubeconfig written', {
          path: this.#installer.kubeconfigPath,
        });
      }
      const outcome = await this.#installer.ensureConfig();
      if (outcome.state === 'busy') {
        // Another writer kept changing the file during the whole pass: go again after the debounce.
        logger.info('CNI config kept changing while we chained into it; retrying', { file: outcome.file, reason: outcome.reason });
        this.#dirty = true;
        return;
      }
      if (outcome.state === 'waiting') {
        if (this.#phase !== 'waiting-for-primary') logger.info('waiting for the primary CNI config', { reason: outcome.reason });
        this.#phase = 'waiting-for-primary';
        this.#lastError = outcome.reason;
        return;
      }
      if (outcome.state === 'written') {
        if (this.#installedOnce) {
          logger.warn('CNI config lost our entry; re-inserted', { file: outcome.file, previous: outcome.previous });
          this.#noteRepair(`config:${outcome.file}`);
        } else {
          logger.info('istio-cni chained into the CNI config', { file: outcome.file, previous: outcome.previous });
        }
      }
      this.#phase = 'installed';
      this.#installedOnce = true;
      this.#lastError = undefined;
    } catch (err) {
      this.#metrics.errors.inc();
      this.#lastError = describeError(err);
      if (this.#phase !== 'installed') this.#phase = 'error';
      logger.error('install pass failed; will retry', { err: this.#lastError });
    }
  }

  async #shutdown(): Promise<void> {
    const { logger } = this.#o;
    let decision;
    try {
      decision = await this.#o.shutdownAdvisor.decide();
    } catch (err) {
      decision = { action: 'keep' as const, reason: `shutdown advisor failed: ${describeError(err)}` };
    }
    if (decision.action === 'keep') {
      logger.info('leaving the plugin installed', { reason: decision.reason });
      return;
    }
    logger.info('uninstalling the plugin', { reason: decision.reason });
    try {
      const result = await this.#installer.uninstall();
      logger.info('plugin uninstalled', { config: result.config, removed: result.removed });
    } catch (err) {
      logger.error('uninstall failed', { err: describeError(err) });
    }
  }
}
