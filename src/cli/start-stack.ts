/**
 * `npm start` / `certbroker start`: the whole system on one machine — a devcluster (HTTPS,
 * RBAC), the CA over TLS, a node broker for `node-1` with its own least-privilege RBAC, sample
 * namespaces, service accounts and pods (some on `node-2`), the `node-1` pods registered through
 * the broker's CNI socket with the CNI plugin's client, and a sample client of each of the broker's
 * three fronts on its real socket: a consumer (ztunnel's identity) subscribed to every `node-1`
 * pod over the Broker API (UDS + mTLS), a FetchX509SVID stream on the Workload API socket from a
 * process in pod shop/cart-0's cgroup (root only; otherwise the view says why), and ztunnel's
 * CreateCertificate calls through the Istio CA front. Short certificate lifetimes make rotation
 * visible within minutes. Logs (warnings) go to stderr; stdout shows the live view.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { createLogger, parseLogLevel, type Logger } from '../core/log.js';
import { aborted, signalController } from '../ops/lifecycle.js';
import { startDevCluster } from '../devcluster/index.js';
import { PRIVATE_DIR_MODE } from '../ops/private-dir.js';
import { startIstioCaSample, startWorkloadSample } from './stack-clients.js';
import { applySampleObjects, CONSUMER_SA, createSamplePods, kubeConfigFor, startStackBroker, startStackCa, subscribeConsumer, SYSTEM_NS, TD, ZTUNNEL_POD } from './stack-parts.js';
import { renderStackView, viewPrinter } from './stack-view.js';
import { startCsrStack } from './stack-csr.js';

export interface StartOptions {
  readonly certTtlSeconds: number;
  /** The CA's signer: its self-signed root (default), or the Kubernetes CSR API signed by `certbroker k8s-signer`. */
  readonly signer?: 'self-signed' | 'kubernetes-csr';
  /** Stop by itself after this many seconds (0 = run until Ctrl-C). */
  readonly durationSeconds: number;
  /** Refresh period of the live view. */
  readonly intervalMs: number;
  readonly print?: (text: string) => void;
  readonly signal?: AbortSignal;
}

/** The whole stack stops in a few seconds; a process still alive this long after the stop began exits anyway. */
const STOP_HARD_EXIT_MS = 15_000;

/**
 * `signal`, or a deadline `ms` from now, whichever comes first. Not
 * `AbortSignal.any([signal, AbortSignal.timeout(ms)])`: Node 20 holds the timeout signal inside
 * `any()` only weakly, so after a garbage collection it may never fire (nodejs/node#57736) and
 * `--duration-seconds` never ended the stack. A plain timer owned here does; `dispose()` clears it.
 */
export function abortAfter(signal: AbortSignal, ms: number, reason: string): { readonly signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  const timer = setTimeout(() => controller.abort(new Error(reason)), ms);
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    dispose() {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    },
  };
}

/** The stack's scratch directory (admin kubeconfig, the broker's sockets): 0700 whatever the umask. */
export async function createStackDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'certbroker-stack-'));
  await chmod(dir, PRIVATE_DIR_MODE);
  return dir;
}

export async function runLocalStack(options: StartOptions): Promise<void> {
  const logger: Logger = createLogger({ level: parseLogLevel(process.env['LOG_LEVEL'], 'warn') });
  const print = options.print ?? ((t: string) => process.stdout.write(t + '\n'));
  // SIGTERM/SIGINT, or the reader of stdout going away (`certbroker start | head -1`): stop
  // quietly and clean up; still alive 15 s later, exit anyway.
  const controller = options.signal ? undefined : signalController(logger, { hardExitAfterMs: STOP_HARD_EXIT_MS });
  const signal = options.signal ?? controller!.signal;
  const dir = await createStackDir();
  const cleanups: Array<() => Promise<unknown>> = [];
  const stopAll = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const dc = await startDevCluster({ simulateKubelet: true, logger });
    cleanups.push(() => dc.close());
    const kubeconfigPath = join(dir, 'kubeconfig');
    await dc.writeKubeconfig(kubeconfigPath);
    const admin = kubeConfigFor(dc.kubeconfigYaml({ token: dc.adminToken }));
    const core = admin.makeApiClient(CoreV1Api);
    await applySampleObjects(dc);

    const csr = options.signer === 'kubernetes-csr' ? await startCsrStack({ dc, core, dir, certTtlSeconds: options.certTtlSeconds, logger }) : undefined;
    if (csr) cleanups.push(() => csr.signer.stop());
    const ca = csr?.ca ?? (await startStackCa(admin, options.certTtlSeconds, logger));
    cleanups.push(() => ca.stop());
    const broker = await startStackBroker({ dc, core, ca, certTtlSeconds: options.certTtlSeconds, dir, logger });
    cleanups.push(() => broker.stop());
    const readyWait = abortAfter(signal, 30_000, 'the broker was not ready within 30 s');
    await broker.whenReady(readyWait.signal).finally(() => readyWait.dispose());

    const uids = await createSamplePods(core, broker);
    const consumer = await subscribeConsumer(core, ca, broker, uids, signal);
    cleanups.push(async () => consumer.close());
    const workload = await startWorkloadSample(broker.workloadApiSocketPath!, { key: 'shop/cart-0', uid: uids.get('shop/cart-0')! }, logger);
    cleanups.push(() => workload.close());
    const ztunnelKey = `${ZTUNNEL_POD.namespace}/${ZTUNNEL_POD.name}`;
    const istioCa = startIstioCaSample({
      core,
      ca,
      broker,
      ztunnelPod: { ...ZTUNNEL_POD, uid: uids.get(ztunnelKey)! },
      ownIdentity: `spiffe://${TD}/ns/${SYSTEM_NS}/sa/${CONSUMER_SA}`,
      impersonated: `spiffe://${TD}/ns/shop/sa/cart`,
      certTtlSeconds: options.certTtlSeconds,
      logger,
    });
    cleanups.push(async () => istioCa.close());

    const info = [
      `devcluster ${dc.url} (kubectl --kubeconfig ${kubeconfigPath} get pods -A)`,
      `CA 127.0.0.1:${ca.port} (TLS, signer ${ca.signer.description}${csr ? ' signed by certbroker k8s-signer; CSRs last at least 600 s' : ''}), workload certificate TTL ${options.certTtlSeconds}s`,
      `broker: CNI socket ${broker.cniEventSocketPath}, ops http://127.0.0.1:${broker.opsPort}/metrics`,
    ];
    const startedAt = Date.now();
    const tty = process.stdout.isTTY === true && options.print === undefined;
    const tick = viewPrinter(print, tty, () => renderStackView({ broker, consumer, workload, istioCa, startedAt, info }));
    tick();
    const timer = setInterval(tick, options.intervalMs);
    cleanups.push(async () => clearInterval(timer));
    if (options.durationSeconds > 0) {
      const until = abortAfter(signal, options.durationSeconds * 1000, 'duration reached');
      cleanups.push(async () => until.dispose());
      await aborted(until.signal);
    } else {
      await aborted(signal);
    }
    tick();
  } finally {
    await stopAll();
    print('stopped: consumer, broker, CA and devcluster are down.');
  }
}
