/**
 * Fault suite — the CNI plugin's ADD against an API server that accepts and never answers
 * (a TCP server that never starts TLS, and a TLS server that goes silent after the handshake).
 *
 * - As the runtime runs it (the plugin's entry, a real process) with a small `add_timeout_ms`:
 *   the ADD ends with CNI code 11 naming the budget and the last failure.
 * - With the default budget (30 s, no `add_timeout_ms` given), in process on a FakeClock that
 *   the test moves: the whole ADD takes exactly its budget on that clock, with every attempt
 *   and wait inside it, and closes every connection it opened — no 30 s of real waiting.
 *
 * Today's code (before this suite) had no budget: 30 attempts, each costing up to twice
 * `kube_request_timeout_ms`, ~329 s with the defaults.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FakeClock } from '../support/fake-clock.js';
import { renderKubeconfigFile } from '../../src/core/kubeconfig-file.js';
import { Secret } from '../../src/core/secret.js';
import { DEFAULT_ADD_TIMEOUT_MS } from '../../src/cni/plugin/config.js';
import { CNI_KUBECONFIG_FILE_NAME } from '../../src/protocol/cni-event.js';
import { parsePluginConfig } from '../../src/cni/plugin/config.js';
import { runPlugin } from '../../src/cni/plugin/plugin.js';
import { loadInstallConfig } from '../../src/cni/install/config.js';
import { Installer } from '../../src/cni/install/installer.js';
import { execPlugin } from '../support/cni-runner.js';
import { silentTlsMaterial, startHungServer, type HungServer, type TlsMaterial } from '../support/hung-server.js';
import { Scratch } from '../support/scratch.js';

const MAIN = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/cni/plugin/main.js');
const ENV = {
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'c0ffee02',
  CNI_NETNS: '/var/run/netns/absent-budget',
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/opt/cni/bin',
  CNI_ARGS: 'K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;IgnoreUnknown=true',
};

interface CniErrorObject {
  readonly code: number;
  readonly msg: string;
  readonly details: string;
}

describe('fault: CNI ADD against an API server that never answers', () => {
  const scratch = Scratch.forFile('fault-cni-budget-');
  let material: TlsMaterial;
  const servers: HungServer[] = [];

  before(async () => {
    material = await silentTlsMaterial();
  });

  after(async () => {
    for (const s of servers) await s.close();
  });

  /** A run dir whose plugin kubeconfig points at a hung API server of the given kind. */
  const runDirFor = async (kind: 'tcp' | 'tls'): Promise<{ server: HungServer; runDir: string }> => {
    const server = await startHungServer(kind === 'tls' ? { tls: material } : {});
    servers.push(server);
    const runDir = scratch.path(`run-${kind}-${servers.length}`);
    mkdirSync(runDir, { recursive: true });
    writeFileSync(
      resolve(runDir, CNI_KUBECONFIG_FILE_NAME),
      renderKubeconfigFile({
        server: `https://${server.address}`,
        caPem: material.caCertPem,
        token: new Secret('plugin-token'),
        clusterName: 'hung',
        userName: 'istio-cni',
        contextName: 'hung',
      }),
      { mode: 0o600 },
    );
    return { server, runDir };
  };

  const conf = (runDir: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ cniVersion: '1.0.0', name: 'k8s-pod-network', type: 'istio-cni', cni_agent_run_dir: runDir, ...extra });

  for (const kind of ['tcp', 'tls'] as const) {
    it(`the plugin process fails the ADD with 11 naming add_timeout_ms (${kind === 'tcp' ? 'no TLS handshake' : 'silent after TLS'})`, { timeout: 60_000 }, async () => {
      const { server, runDir } = await runDirFor(kind);
      const o = await execPlugin({
        command: process.execPath,
        args: [MAIN],
        env: ENV,
        stdin: conf(runDir, { add_timeout_ms: 1500, kube_request_timeout_ms: 1000, pod_retrieval_interval_ms: 200 }),
        timeoutMs: 30_000,
      });
      assert.notEqual(o.code, 0, o.stderr.slice(-1500));
      const e = JSON.parse(o.stdout) as CniErrorObject;
      assert.equal(e.code, 11, o.stdout);
      assert.match(e.msg, /ADD timed out: not finished within add_timeout_ms \(1500 ms\)/);
      assert.match(e.details, /last error: GET \/api\/v1\/namespaces\/shop\/pods\/web-0 on 127\.0\.0\.1:\d+: no answer within 1000 ms/);
      assert.ok(server.accepted >= 1, 'the plugin did reach the API server');
    });
  }

  it('with the default budget the whole ADD takes 30 s of (fake) time, every attempt inside it', { timeout: 60_000 }, async () => {
    const { server, runDir } = await runDirFor('tcp');
    const clock = new FakeClock();
    const t0 = clock.now();
    const logs: Array<{ msg: string }> = [];
    let done = false;
    const outcomeWon = new AbortController();
    const outcome = runPlugin({
      env: ENV,
      stdin: conf(runDir, { plugin_log_level: 'debug' }), // defaults: 30 retries x 1000 ms, 5000 ms per request, 30 000 ms budget
      clock,
      logSink: (line) => logs.push(JSON.parse(line) as { msg: string }),
    }).finally(() => {
      done = true;
      outcomeWon.abort(); // the last timer wait lost the race: end it
    });
    const count = (msg: string) => logs.filter((l) => l.msg === msg).length;
    /** Real-time wait for socket state (a guard, not a measurement); `orDone`: stop early when the ADD ended. */
    const waitReal = async (what: string, probe: () => boolean, orDone = true) => {
      for (let i = 0; i < 800 && !probe() && !(orDone && done); i++) await new Promise((r) => setTimeout(r, 25));
      if (!probe() && !(orDone && done)) throw new Error(`gave up waiting for ${what}`);
    };
    while (!done) {
      // Armed: the budget's timer, plus an attempt's deadline or the wait before the next one.
      await Promise.race([clock.waitForTimers(2, { signal: outcomeWon.signal }), outcome]);
      if (done) break;
      const started = count('reading the pod from the API server');
      const failed = count('API request failed');
      // Mid-attempt: let its connection reach the hung server before its deadline passes.
      if (started > failed) await waitReal(`attempt ${started} connected`, () => server.accepted >= started);
      await clock.advance(clock.nextDue! - clock.now());
    }
    const result = await outcome;
    const e = JSON.parse(result.stdout) as CniErrorObject;
    assert.equal(result.exitCode, 1);
    assert.equal(e.code, 11, result.stdout);
    assert.match(e.msg, new RegExp(`not finished within add_timeout_ms \\(${DEFAULT_ADD_TIMEOUT_MS} ms\\)`));
    assert.match(e.details, /no answer within 5000 ms/);
    // Derived from the defaults: attempts at 0, 6, 12, 18, 24 s (5 s each, 1 s apart), then the budget ends it.
    assert.equal(clock.now() - t0, DEFAULT_ADD_TIMEOUT_MS, 'the ADD ends exactly when its budget is spent');
    assert.equal(count('reading the pod from the API server'), 5);
    assert.equal(server.accepted, 5);
    await waitReal('every attempt closed its connection', () => server.openConnections === 0, false);
  });

  it('install-cni writes PLUGIN_ADD_TIMEOUT_MS into the entry as add_timeout_ms; unset, the plugin uses 30 s', () => {
    const env = { KUBERNETES_SERVICE_HOST: '10.96.0.1', UNINSTALL_ON_EXIT: 'never' };
    const entryFor = (extra: Record<string, string>) => new Installer(loadInstallConfig({ ...env, ...extra })).pluginEntry as Record<string, unknown>;
    const set = entryFor({ PLUGIN_ADD_TIMEOUT_MS: '12000' });
    assert.equal(set.add_timeout_ms, 12000);
    assert.equal(parsePluginConfig({ ...set, cniVersion: '1.0.0' }, {}).addTimeoutMs, 12000);
    const unset = entryFor({});
    assert.equal('add_timeout_ms' in unset, false, 'the entry stays Istio-shaped when unset');
    assert.equal(parsePluginConfig({ ...unset, cniVersion: '1.0.0' }, {}).addTimeoutMs, DEFAULT_ADD_TIMEOUT_MS);
    assert.throws(() => loadInstallConfig({ ...env, PLUGIN_ADD_TIMEOUT_MS: '10' }), /PLUGIN_ADD_TIMEOUT_MS=10 is below the minimum 1000/);
  });
});
