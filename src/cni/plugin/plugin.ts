/**
 * The istio-cni plugin's commands (CNI spec 1.1.0): ADD, DEL, CHECK, VERSION, STATUS, GC.
 * `runPlugin` takes the environment and stdin and returns what goes to stdout and the exit code;
 * it never throws and never prints a stack: failures become the spec's error object, and their
 * causes go to the log (stderr).
 */
import { access } from 'node:fs/promises';
import type { Clock } from '../../core/clock.js';
import { deadline, type Deadline } from '../../core/deadline.js';
import { createLogger, type Logger } from '../../core/log.js';
import { CniError, toErrorResult } from './cni-error.js';
import { parseCniArgs, type K8sArgs } from './cni-args.js';
import { toPodIpConfig, type CniPluginAddEvent, type PodIpConfig } from '../../protocol/cni-event.js';
import type { BrokerAmbientOutcome } from './broker-ambient-client.js';
import { CURRENT_VERSION, SUPPORTED_VERSIONS, convertResult, resultAddresses, versionAtLeast } from './cni-version.js';
import { configVersion, decodeConfigJson, parsePluginConfig, type PluginConfig } from './config.js';
import { isAmbientPod } from './enablement.js';
import type { PodInfo, PodSource } from './kube-client.js';
import type { SidecarProgrammer } from './sidecar-programmer.js';
import { sidecarDecision } from './sidecar-redirect.js';
import { pluginClock } from './plugin-clock.js';

export const ENV = Object.freeze({
  command: 'CNI_COMMAND',
  containerId: 'CNI_CONTAINERID',
  netns: 'CNI_NETNS',
  ifname: 'CNI_IFNAME',
  args: 'CNI_ARGS',
  path: 'CNI_PATH',
});

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'VERSION' | 'STATUS' | 'GC';

const REQUIRED_ENV: Readonly<Record<CniCommand, readonly string[]>> = {
  ADD: [ENV.containerId, ENV.netns, ENV.ifname, ENV.path],
  CHECK: [ENV.containerId, ENV.netns, ENV.ifname, ENV.path],
  DEL: [ENV.containerId, ENV.ifname, ENV.path],
  VERSION: [],
  STATUS: [],
  GC: [],
};

/** The istio-cni DaemonSet's pods: name prefix, in the plugin's own namespace. */
export const OWN_AGENT_POD_PREFIX = 'istio-cni-node-';

export interface PluginOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdin: string;
  readonly clock?: Clock;
  /** Where log lines go (default stderr). */
  readonly logSink?: (line: string) => void;
}

export interface PluginOutcome {
  readonly stdout: string;
  readonly exitCode: number;
}

type Env = Readonly<Record<string, string | undefined>>;

function print(value: unknown): string {
  return JSON.stringify(value, null, 4) + '\n';
}

/** The request's cniVersion if stdin says so (for error objects); the current one otherwise. */
function bestEffortVersion(stdin: string): string {
  try {
    return configVersion(decodeConfigJson(stdin));
  } catch {
    return CURRENT_VERSION;
  }
}

function parseCommand(env: Env): CniCommand {
  const raw = env[ENV.command];
  if (raw === undefined || raw === '') throw new CniError('ERR_CNI_INVALID_ENV', `required env variable ${ENV.command} is missing`);
  if (raw === 'ADD' || raw === 'DEL' || raw === 'CHECK' || raw === 'VERSION' || raw === 'STATUS' || raw === 'GC') return raw;
  throw new CniError('ERR_CNI_INVALID_ENV', `unknown ${ENV.command} ${JSON.stringify(raw)}`, {
    details: 'want ADD, DEL, CHECK, VERSION, STATUS or GC',
  });
}

function checkEnv(command: CniCommand, env: Env): void {
  const missing = REQUIRED_ENV[command].filter((k) => env[k] === undefined || env[k] === '');
  if (missing.length > 0) {
    throw new CniError('ERR_CNI_INVALID_ENV', `required env variables [${missing.join(', ')}] missing for ${command}`);
  }
  const id = env[ENV.containerId];
  if (id !== undefined && id !== '' && !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(id)) {
    throw new CniError('ERR_CNI_INVALID_ENV', `${ENV.containerId} has invalid characters`);
  }
  const ifname = env[ENV.ifname];
  if (ifname !== undefined && ifname !== '') {
    if (ifname.length > 15 || ifname === '.' || ifname === '..' || /[/:\s]/.test(ifname)) {
      throw new CniError('ERR_CNI_INVALID_ENV', `${ENV.ifname} ${JSON.stringify(ifname)} is not a valid interface name`);
    }
  }
}

function requireVersion(config: PluginConfig, command: CniCommand, min: string): void {
  if (!versionAtLeast(config.cniVersion, min)) {
    throw new CniError('ERR_CNI_INCOMPATIBLE_VERSION', `config version ${config.cniVersion} does not allow ${command}`, {
      details: `${command} needs cniVersion ${min} or later`,
    });
  }
}

export async function runPlugin(options: PluginOptions): Promise<PluginOutcome> {
  const { env, stdin } = options;
  let errorVersion = CURRENT_VERSION;
  let log: Logger = createLogger({ level: 'info', fields: { plugin: 'istio-cni' }, ...(options.logSink ? { sink: options.logSink } : {}) });
  try {
    const command = parseCommand(env);
    if (command === 'VERSION') {
      return { stdout: print({ cniVersion: CURRENT_VERSION, supportedVersions: SUPPORTED_VERSIONS }), exitCode: 0 };
    }
    errorVersion = bestEffortVersion(stdin);
    checkEnv(command, env);
    let config: PluginConfig;
    try {
      config = parsePluginConfig(decodeConfigJson(stdin), env);
    } catch (err) {
      // Teardown must not get stuck on a config this plugin cannot use (Istio's DEL reads none).
      if (command === 'DEL' && err instanceof CniError && err.code === 'ERR_CNI_INVALID_CONFIG') {
        log.warn('DEL with an invalid network configuration: nothing to do', { err: err.message });
        return { stdout: '', exitCode: 0 };
      }
      throw err;
    }
    log = createLogger({
      level: config.logLevel,
      fields: { plugin: 'istio-cni', command, containerId: env[ENV.containerId] ?? '' },
      ...(options.logSink ? { sink: options.logSink } : {}),
    });
    const ctx: CommandContext = { env, config, log, clock: options.clock ?? pluginClock };
    switch (command) {
      case 'ADD':
        return { stdout: print(await cmdAdd(ctx)), exitCode: 0 };
      case 'DEL':
        await cmdDel(ctx);
        return { stdout: '', exitCode: 0 };
      case 'CHECK':
        requireVersion(config, command, '0.4.0');
        if (config.prevResult !== undefined) convertResult(config.prevResult, config.cniVersion);
        return { stdout: '', exitCode: 0 };
      case 'STATUS':
        requireVersion(config, command, '1.1.0');
        await cmdStatus(ctx);
        return { stdout: '', exitCode: 0 };
      case 'GC':
        requireVersion(config, command, '1.1.0');
        cmdGc(ctx);
        return { stdout: '', exitCode: 0 };
    }
  } catch (err) {
    if (err instanceof CniError) log.error('istio-cni failed', { code: err.code, err: err.message, details: err.details });
    else log.error('istio-cni failed unexpectedly', { err });
    return { stdout: print(toErrorResult(err, errorVersion)), exitCode: 1 };
  }
}

interface CommandContext {
  readonly env: Env;
  readonly config: PluginConfig;
  readonly log: Logger;
  readonly clock: Clock;
}

/** An ADD in progress: everything it waits for ends when its budget (`add_timeout_ms`) is spent. */
interface AddContext extends CommandContext {
  readonly budget: Deadline;
}

/**
 * The ADD ran out of its budget (code 11: the runtime retries the pod later). Names the limit and
 * the last failure seen before it (e.g. "GET /api/v1/namespaces/x/pods/y: no answer within 5000 ms").
 */
export class AddTimeoutError extends CniError {
  constructor(budgetMs: number, last: unknown) {
    super('ERR_CNI_TRY_AGAIN', `ADD timed out: not finished within add_timeout_ms (${budgetMs} ms)`, {
      details: last === undefined ? 'nothing answered in time' : `last error: ${last instanceof Error ? last.message : String(last)}`,
    });
  }
}

function isOwnAgent(config: PluginConfig, args: K8sArgs): boolean {
  return config.podNamespace !== '' && args.podNamespace === config.podNamespace && args.podName.startsWith(OWN_AGENT_POD_PREFIX);
}

function emptyResult(version: string): Record<string, unknown> {
  return { cniVersion: version, dns: {} };
}

/**
 * ADD within one budget: the API reads with their retries, the broker registration and the rule
 * programming all get at most what is left of `add_timeout_ms`, so a dependency that hangs
 * costs the ADD that long and no more (each step's own timeout still applies within it).
 */
async function cmdAdd(ctx: CommandContext): Promise<Record<string, unknown>> {
  const budget = deadline(ctx.config.addTimeoutMs, { what: 'ADD', clock: ctx.clock });
  try {
    return await addWithinBudget({ ...ctx, budget });
  } catch (err) {
    if (budget.signal.aborted && !(err instanceof AddTimeoutError)) throw new AddTimeoutError(ctx.config.addTimeoutMs, err);
    throw err;
  } finally {
    budget.dispose();
  }
}

async function addWithinBudget(ctx: AddContext): Promise<Record<string, unknown>> {
  const { config, env, log } = ctx;
  // Validate and convert prevResult first: whatever happens next, this is what we print.
  const result = config.prevResult === undefined ? emptyResult(config.cniVersion) : convertResult(config.prevResult, config.cniVersion);
  const args = parseCniArgs(env[ENV.args]);
  const pod = `${args.podNamespace}/${args.podName}`;

  if (config.ambientEnabled && isOwnAgent(config, args)) {
    log.info('own istio-cni agent pod, passing through', { pod });
    return result;
  }
  if (args.podName === '' || args.podNamespace === '') {
    log.debug('not a Kubernetes pod (no K8S_POD_NAME/K8S_POD_NAMESPACE), passing through');
    return result;
  }
  if (config.excludeNamespaces.includes(args.podNamespace)) {
    log.info('pod namespace excluded', { pod });
    return result;
  }

  const ips = resultAddresses(result).map(toPodIpConfig).filter((ip): ip is PodIpConfig => ip !== undefined);
  const event = { Netns: env[ENV.netns] ?? '', PodName: args.podName, PodNamespace: args.podNamespace, IPs: ips.length > 0 ? ips : null };
  // With ambient on, the broker answers from its watches first (one round trip, no API call); a pod it does not know takes the API path.
  const asked: BrokerAmbientOutcome | undefined = config.ambientEnabled ? await askBroker(ctx, event, args.podUid) : undefined;
  if (asked?.known && asked.ambient) {
    log.info('ambient pod registered with the node broker', { pod, ips: ips.map((ip) => ip.Address?.IP), via: 'broker watch', ...(asked.reason ? { reason: asked.reason } : {}) });
    return result;
  }
  if (asked && !asked.known) log.debug('broker does not know the pod; reading it from the API server', { pod, why: asked.why });
  const decidedByBroker = asked?.known === true;

  // Without ambient, a pod that gets rules is the only kind left: the iptables code is loaded while
  // the API server answers (its evaluation is CPU the round trip leaves idle; setImmediate: after
  // the connection has been started, not before); unused when the pod needs none.
  const programmer = config.ambientEnabled ? undefined : new Promise((r) => setImmediate(r)).then(() => sidecarProgrammer(ctx));
  programmer?.catch(() => undefined); // awaited below when used; never an unhandled rejection
  // With ambient on (and undecided), the namespace is needed too: both are read at once.
  const fetched = await fetchPod(ctx, args, config.ambientEnabled && !decidedByBroker);
  if (fetched === 'own-agent') return result;
  const { podInfo, namespaceLabels } = fetched;

  if (config.ambientEnabled && !decidedByBroker) {
    const ambient = isAmbientPod(
      { podLabels: podInfo.labels, podAnnotations: podInfo.annotations, hostNetwork: podInfo.hostNetwork, namespaceLabels },
      config.enablementSelectors,
    );
    if (ambient) {
      // Imported when needed, as the API client and the iptables code are (main.ts).
      const { pushCniAddEvent } = await import('./cni-event-client.js');
      await pushCniAddEvent(event, { socketPath: config.cniEventSocketPath, timeoutMs: config.cniEventTimeoutMs, signal: ctx.budget.signal, clock: ctx.clock });
      log.info('ambient pod registered with the node broker', { pod, ips: ips.map((ip) => ip.Address?.IP) });
      return result;
    }
  }
  if (config.ambientEnabled) log.debug('pod is not ambient', { pod });

  const decision = sidecarDecision(podInfo);
  if (!decision.redirect) {
    log.info('no redirection for pod', { pod, reason: decision.reason });
    return result;
  }
  if (config.nativeNftables) log.warn('native_nftables is not supported; programming iptables rules', { pod });
  const addresses = resultAddresses(result).map((a) => a.address);
  const hasV4 = addresses.some((a) => !a.includes(':'));
  const hasV6 = addresses.some((a) => a.includes(':'));
  await (await (programmer ?? sidecarProgrammer(ctx))).program({
    netns: env[ENV.netns] ?? '',
    podName: args.podName,
    podNamespace: args.podNamespace,
    settings: decision.settings,
    enableIPv6: hasV6 && (decision.settings.dualStack || !hasV4),
    signal: ctx.budget.signal,
  });
  return result;
}

async function askBroker(ctx: AddContext, event: CniPluginAddEvent, podUid: string): Promise<BrokerAmbientOutcome> {
  const { askBrokerAmbientAdd } = await import('./broker-ambient-client.js');
  return askBrokerAmbientAdd({ event, podUid, selectors: ctx.config.enablementSelectors }, { ...ctx.config, signal: ctx.budget.signal, clock: ctx.clock });
}

async function sidecarProgrammer(ctx: CommandContext): Promise<SidecarProgrammer> {
  const { IptablesSidecarProgrammer } = await import('./sidecar-programmer.js');
  return new IptablesSidecarProgrammer({ logger: ctx.log, dryRunFilePath: ctx.config.dryRunFilePath });
}

async function podSource(config: PluginConfig, clock: Clock): Promise<PodSource> {
  const [{ loadKubeconfig }, { HttpsKubeClient }] = await Promise.all([import('./kubeconfig.js'), import('./kube-client.js')]);
  const access = await loadKubeconfig(config.kubeconfigPath);
  return new HttpsKubeClient({ access, requestTimeoutMs: config.kubeRequestTimeoutMs, clock });
}

type FetchedPod = { readonly podInfo: PodInfo; readonly namespaceLabels: Readonly<Record<string, string>> };

async function fetchPod(ctx: AddContext, args: K8sArgs, withNamespace: boolean): Promise<FetchedPod | 'own-agent'> {
  // A pod the broker watches comes from it (one round trip, no TLS); otherwise from the API server.
  if (!withNamespace && args.podUid !== '') {
    const { askBrokerSidecarPod } = await import('./broker-sidecar-client.js');
    const asked = await askBrokerSidecarPod({ namespace: args.podNamespace, name: args.podName, uid: args.podUid }, { ...ctx.config, signal: ctx.budget.signal, clock: ctx.clock });
    ctx.log.debug(asked.pod ? 'pod read from the node broker' : 'broker does not have the pod; reading it from the API server', { why: asked.pod ? undefined : asked.why });
    if (asked.pod) return { podInfo: asked.pod, namespaceLabels: {} };
  }
  let source: PodSource;
  try {
    source = await podSource(ctx.config, ctx.clock);
  } catch (err) {
    if (isOwnAgent(ctx.config, args)) {
      ctx.log.info('no API access but this looks like our own agent pod, passing through', { pod: args.podName });
      return 'own-agent';
    }
    throw err;
  }
  return withRetries(ctx, args, async (signal) => {
    const [podInfo, ns] = await Promise.all([
      source.getPod(args.podNamespace, args.podName, signal),
      withNamespace ? source.getNamespace(args.podNamespace, signal) : undefined,
    ]);
    return { podInfo, namespaceLabels: ns?.labels ?? {} };
  });
}

/**
 * Istio's retry semantics for reading the pod: up to `pod_retrieval_max_retries` attempts,
 * `pod_retrieval_interval_ms` apart, whatever the error; while degraded, the agent's own pod is
 * let through. The last error is returned (11 try-again for an unreachable or failing API server).
 * Attempts and waits stop when the ADD's budget is spent (AddTimeoutError naming the last error).
 */
async function withRetries<T>(ctx: AddContext, args: K8sArgs, fn: (signal: AbortSignal) => Promise<T>): Promise<T | 'own-agent'> {
  const max = ctx.config.podRetrievalMaxRetries;
  const { budget } = ctx;
  let last: unknown;
  for (let attempt = 1; attempt <= max; attempt++) {
    if (budget.signal.aborted) throw new AddTimeoutError(ctx.config.addTimeoutMs, last);
    ctx.log.debug('reading the pod from the API server', { attempt, of: max, budgetLeftMs: Math.round(budget.remainingMs()) });
    try {
      return await fn(budget.signal);
    } catch (err) {
      if (budget.signal.aborted) throw new AddTimeoutError(ctx.config.addTimeoutMs, last);
      last = err;
      ctx.log.debug('API request failed', { attempt, of: max, err: err instanceof Error ? err.message : String(err) });
      if (isOwnAgent(ctx.config, args)) {
        ctx.log.info('API server unavailable but this looks like our own agent pod, passing through', { pod: args.podName });
        return 'own-agent';
      }
      if (attempt < max) {
        try {
          await ctx.clock.sleep(Math.min(ctx.config.podRetrievalIntervalMs, budget.remainingMs()), budget.signal);
        } catch {
          throw new AddTimeoutError(ctx.config.addTimeoutMs, last);
        }
      }
    }
  }
  throw last;
}

async function cmdDel(ctx: CommandContext): Promise<void> {
  const netns = ctx.env[ENV.netns];
  if (netns === undefined || netns === '' || ctx.config.dryRunFilePath !== undefined) return;
  try {
    await access(netns);
  } catch {
    return; // the namespace is already gone, and with it every rule
  }
  try {
    await (await sidecarProgrammer(ctx)).cleanup(netns);
  } catch (err) {
    // DEL must not fail on leftovers: the namespace and its rules go away with the sandbox.
    ctx.log.warn('could not remove Istio rules from the pod namespace', { err: err instanceof Error ? err.message : String(err) });
  }
}

async function cmdStatus(ctx: CommandContext): Promise<void> {
  try {
    await access(ctx.config.kubeconfigPath);
  } catch {
    throw new CniError('ERR_CNI_NOT_AVAILABLE', `plugin kubeconfig ${ctx.config.kubeconfigPath} is missing`, {
      details: 'install-cni has not written it yet',
    });
  }
}

function cmdGc(ctx: CommandContext): void {
  const valid = ctx.config.raw['cni.dev/valid-attachments'];
  if (valid !== undefined && !Array.isArray(valid)) {
    throw new CniError('ERR_CNI_INVALID_CONFIG', 'cni.dev/valid-attachments must be an array');
  }
  // The plugin keeps no per-attachment state: nothing to collect.
  ctx.log.debug('GC: no state to collect', { validAttachments: Array.isArray(valid) ? valid.length : 0 });
}
