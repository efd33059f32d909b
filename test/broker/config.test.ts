/**
 * readBrokerConfig from environment variables: the update pacing window
 * (BROKER_UPDATE_JITTER_MS) — its default, an explicit value, and every out-of-range or
 * malformed value listed in one ConfigError. Real files: a root PEM and a kubeconfig.
 */
import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DEFAULTS, ENV, readBrokerConfig, UPDATE_JITTER_RANGE_MS, WORKLOAD_API_DEFAULTS, WORKLOAD_API_ENV } from '../../src/broker/index.js';
import { ConfigError } from '../../src/core/config.js';
import { renderKubeconfigFile } from '../../src/core/kubeconfig-file.js';
import { silentLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { createRootCa } from '../../src/pki/index.js';
import { tempDirSync } from '../support/scratch.js';

describe('broker configuration: update pacing window', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    dir = tempDirSync('broker-config-');
    const root = await createRootCa({ subject: 'CN=config test root', ttlSeconds: 3600 });
    await writeFile(join(dir, 'root-cert.pem'), root.pem);
    await writeFile(
      join(dir, 'kubeconfig'),
      renderKubeconfigFile({ server: 'https://127.0.0.1:6443', token: new Secret('t'), clusterName: 'c', userName: 'u', contextName: 'x' }),
    );
    env = {
      NODE_NAME: 'node-1',
      POD_NAME: 'certbroker-node-x',
      POD_NAMESPACE: 'istio-system',
      POD_UID: '11111111-2222-4333-8444-555555555555',
      CA_ROOT_CERT_FILE: join(dir, 'root-cert.pem'),
      KUBECONFIG: join(dir, 'kubeconfig'),
    };
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const read = (extra: NodeJS.ProcessEnv) => readBrokerConfig({ env: { ...env, ...extra }, logger: silentLogger });

  it('defaults to 1000 ms and takes an explicit value, 0 (no pacing) and the maximum included', async () => {
    assert.equal(DEFAULTS.updateJitterMs, 1000);
    assert.equal((await read({})).updateJitterMs, 1000);
    assert.equal((await read({ [ENV.UPDATE_JITTER_MS]: '250' })).updateJitterMs, 250);
    assert.equal((await read({ [ENV.UPDATE_JITTER_MS]: '0' })).updateJitterMs, 0);
    assert.equal((await read({ [ENV.UPDATE_JITTER_MS]: String(UPDATE_JITTER_RANGE_MS.max) })).updateJitterMs, 60_000);
  });

  it('refuses values outside 0..60000 and non-integers, naming the variable, with the other problems', async () => {
    const refused = async (value: string, why: RegExp) => {
      await assert.rejects(read({ [ENV.UPDATE_JITTER_MS]: value, [ENV.SHUTDOWN_SECONDS]: '-1' }), (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.equal(e.code, 'ERR_CONFIG_INVALID');
        assert.match(e.message, why);
        assert.match(e.message, /BROKER_SHUTDOWN_GRACE_SECONDS=-1/, 'every problem at once');
        return true;
      });
    };
    await refused('60001', /BROKER_UPDATE_JITTER_MS=60001 is above the maximum 60000/);
    await refused('-5', /BROKER_UPDATE_JITTER_MS=-5 is below the minimum 0/);
    await refused('1s', /BROKER_UPDATE_JITTER_MS="1s" is not an integer/);
  });

  it('a bad LOG_LEVEL is listed with the other problems (the logger made before the config falls back to info)', async () => {
    await assert.rejects(read({ [ENV.LOG_LEVEL]: 'loud', [ENV.SHUTDOWN_SECONDS]: '-1' }), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.match(e.message, /LOG_LEVEL: unknown log level "loud"/);
      assert.match(e.message, /BROKER_SHUTDOWN_GRACE_SECONDS=-1/, 'every problem at once');
      return true;
    });
    await read({ [ENV.LOG_LEVEL]: 'debug' });
  });

  it('CA_ADDRESS: a DNS name, an IP, or a list of IPs (several need CA_TLS_SERVER_NAME); other forms refused with the other problems', async () => {
    assert.equal((await read({})).ca.address, 'istiod.istio-system.svc:15012');
    assert.equal((await read({ CA_ADDRESS: 'certbroker-ca-headless.istio-system.svc:15012' })).ca.address, 'certbroker-ca-headless.istio-system.svc:15012');
    const list = '10.0.0.1:15012,10.0.0.2:15012,10.0.0.3:15012';
    assert.equal((await read({ CA_ADDRESS: list, CA_TLS_SERVER_NAME: 'certbroker-ca.istio-system.svc' })).ca.address, list);
    const refused = async (extra: NodeJS.ProcessEnv, why: RegExp) => {
      await assert.rejects(read({ ...extra, [ENV.SHUTDOWN_SECONDS]: '-1' }), (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.equal(e.code, 'ERR_CONFIG_INVALID');
        assert.match(e.message, why);
        assert.match(e.message, /BROKER_SHUTDOWN_GRACE_SECONDS=-1/, 'every problem at once');
        return true;
      });
    };
    await refused({ CA_ADDRESS: list }, /CA_ADDRESS lists 3 addresses: set CA_TLS_SERVER_NAME/);
    await refused({ CA_ADDRESS: '10.0.0.1:15012,ca.example:15012', CA_TLS_SERVER_NAME: 'ca' }, /CA_ADDRESS: .*a list holds IP addresses only/);
    await refused({ CA_ADDRESS: '10.0.0.1:15012,,10.0.0.2:15012', CA_TLS_SERVER_NAME: 'ca' }, /CA_ADDRESS: .*empty address/);
    await refused({ CA_ADDRESS: '10.0.0.1:99999' }, /CA_ADDRESS: .*port 99999 is not 1-65535/);
    await refused({ CA_ADDRESS: 'istiod.istio-system.svc' }, /CA_ADDRESS: .*is not host:port/);
  });

  it('WORKLOAD_API_SOCKET: off by default; unix:///path (the SPIFFE_ENDPOINT_SOCKET form) or a path; other forms refused with the other problems', async () => {
    assert.equal((await read({})).workloadApiSocketPath, undefined, 'not served unless asked');
    assert.equal((await read({ [ENV.WORKLOAD_API_SOCKET]: 'unix:///var/run/certbroker-workload-api/socket' })).workloadApiSocketPath, '/var/run/certbroker-workload-api/socket');
    assert.equal((await read({ [ENV.WORKLOAD_API_SOCKET]: '/run/wl/socket' })).workloadApiSocketPath, '/run/wl/socket');
    for (const bad of ['tcp://127.0.0.1:8000', 'unix://relative/socket', 'unix:///x/socket?y', 'socket', 'unix:///var/run/certbroker/broker.sock']) {
      await assert.rejects(read({ [ENV.WORKLOAD_API_SOCKET]: bad, [ENV.SHUTDOWN_SECONDS]: '-1' }), (e: unknown) => {
        assert.ok(e instanceof ConfigError, bad);
        assert.match(e.message, new RegExp(`WORKLOAD_API_SOCKET=${JSON.stringify(bad).replace(/[.?*/]/g, '\\$&')}`));
        assert.match(e.message, /BROKER_SHUTDOWN_GRACE_SECONDS=-1/, 'every problem at once');
        return true;
      });
    }
  });

  it('Workload API settings: defaults with the socket, none without; bounds from env and flags (flags win); every problem at once', async () => {
    const sock = { [ENV.WORKLOAD_API_SOCKET]: 'unix:///run/wl/socket' };
    assert.equal((await read({})).workloadApi, undefined);
    assert.deepEqual((await read(sock)).workloadApi, WORKLOAD_API_DEFAULTS);
    const set = await readBrokerConfig({
      env: { ...env, ...sock, [WORKLOAD_API_ENV.PEER_CREDENTIALS]: 'batch', [WORKLOAD_API_ENV.MAX_CONNECTIONS]: '10', [WORKLOAD_API_ENV.MAX_CONNECTIONS_PER_CALLER]: '3' },
      flags: { workloadApiMaxStreams: '20', workloadApiMaxStreamsPerCaller: '5', workloadApiMaxConnections: '12' },
      logger: silentLogger,
    });
    assert.deepEqual(set.workloadApi, { peerCredentials: 'batch', limits: { maxConnections: 12, maxConnectionsPerCaller: 3, maxStreams: 20, maxStreamsPerCaller: 5 }, idleConnectionSeconds: 300 });
    await assert.rejects(
      read({
        ...sock,
        [WORKLOAD_API_ENV.PEER_CREDENTIALS]: 'fast',
        [WORKLOAD_API_ENV.MAX_CONNECTIONS]: '4',
        [WORKLOAD_API_ENV.MAX_CONNECTIONS_PER_CALLER]: '5',
        [WORKLOAD_API_ENV.MAX_STREAMS]: '0',
        [WORKLOAD_API_ENV.MAX_STREAMS_PER_CALLER]: 'many',
        [WORKLOAD_API_ENV.IDLE_CONNECTION_SECONDS]: '0',
      }),
      (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.match(e.message, /WORKLOAD_API_PEER_CREDENTIALS="fast" is not helper or batch/);
        assert.match(e.message, /WORKLOAD_API_MAX_CONNECTIONS_PER_CALLER=5 is above WORKLOAD_API_MAX_CONNECTIONS=4/);
        assert.match(e.message, /WORKLOAD_API_MAX_STREAMS=0 is below the minimum 1/);
        assert.match(e.message, /WORKLOAD_API_MAX_STREAMS_PER_CALLER="many" is not an integer/);
        assert.match(e.message, /WORKLOAD_API_IDLE_CONNECTION_SECONDS=0 is below the minimum 1/);
        return true;
      },
    );
  });

  it('Istio CA front: on 127.0.0.1:15012 by default with localhost/127.0.0.1 and ztunnel allowed; off or empty disables it; flags win', async () => {
    const on = (await read({})).istioCaFront;
    assert.deepEqual(on, {
      host: '127.0.0.1',
      port: 15012,
      servingNames: ['localhost', '127.0.0.1'],
      allowedAccounts: ['istio-system/ztunnel'],
      audiences: ['istio-ca'],
      tokenCacheSeconds: 60,
      ratePerSecond: 50,
      burst: 200,
      maxInFlight: 32,
      transport: 'h2',
    });
    assert.equal((await read({ ISTIO_CA_FRONT_TRANSPORT: 'http2' })).istioCaFront?.transport, 'http2');
    assert.equal((await read({ ISTIO_CA_FRONT_ADDRESS: 'off' })).istioCaFront, undefined);
    assert.equal((await read({ ISTIO_CA_FRONT_ADDRESS: '' })).istioCaFront, undefined);
    const alt = (await read({ ISTIO_CA_FRONT_ADDRESS: '0.0.0.0:15013', ISTIO_CA_FRONT_ALT_HOSTNAME: 'Node-CA.istio-system.svc', ISTIO_CA_FRONT_ALLOWED_ACCOUNTS: 'istio-system/ztunnel,kube-system/ztunnel' })).istioCaFront;
    assert.equal(alt?.host, '0.0.0.0');
    assert.equal(alt?.port, 15013);
    assert.deepEqual(alt?.servingNames, ['localhost', '127.0.0.1', 'node-ca.istio-system.svc']);
    assert.deepEqual(alt?.allowedAccounts, ['istio-system/ztunnel', 'kube-system/ztunnel']);
    const flagged = await readBrokerConfig({ env: { ...env, ISTIO_CA_FRONT_ADDRESS: '127.0.0.1:1' }, flags: { istioCaFrontAddress: 'off' }, logger: silentLogger });
    assert.equal(flagged.istioCaFront, undefined);
    const flaggedEmpty = await readBrokerConfig({ env, flags: { istioCaFrontAddress: '' }, logger: silentLogger });
    assert.equal(flaggedEmpty.istioCaFront, undefined);
  });

  it('Istio CA front: every bad setting listed at once', async () => {
    await assert.rejects(
      read({ ISTIO_CA_FRONT_ADDRESS: 'localhost', ISTIO_CA_FRONT_ALT_HOSTNAME: '*.svc', ISTIO_CA_FRONT_ALLOWED_ACCOUNTS: 'ztunnel', ISTIO_CA_FRONT_MAX_IN_FLIGHT: '0' }),
      (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.match(e.message, /ISTIO_CA_FRONT_ADDRESS="localhost" is not host:port/);
        return true;
      },
    );
    await assert.rejects(read({ ISTIO_CA_FRONT_ALT_HOSTNAME: '*.svc', ISTIO_CA_FRONT_ALLOWED_ACCOUNTS: 'ztunnel', ISTIO_CA_FRONT_MAX_IN_FLIGHT: '0', ISTIO_CA_FRONT_TRANSPORT: 'grpc-js' }), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.problems.length, 4, e.message);
      assert.match(e.message, /ISTIO_CA_FRONT_TRANSPORT/);
      assert.match(e.message, /ISTIO_CA_FRONT_ALT_HOSTNAME: "\*\.svc" is neither an IP address nor a DNS host name/);
      assert.match(e.message, /ISTIO_CA_FRONT_ALLOWED_ACCOUNTS entry "ztunnel" is not namespace\/serviceaccount/);
      assert.match(e.message, /ISTIO_CA_FRONT_MAX_IN_FLIGHT=0 is below the minimum 1/);
      return true;
    });
  });

  it('reference callers: each kind defaults to every allowed caller; a configured list must name allowed callers only', async () => {
    const zt = 'spiffe://cluster.local/ns/istio-system/sa/ztunnel';
    const agent = 'spiffe://cluster.local/ns/istio-system/sa/agent';
    assert.deepEqual((await read({})).referenceCallers, { kubernetes: [zt], pid: [zt] });
    const both = await read({ BROKER_ALLOWED_CALLERS: `${zt},${agent}`, BROKER_PID_REFERENCE_CALLERS: zt });
    assert.deepEqual(both.referenceCallers, { kubernetes: [zt, agent], pid: [zt] });
    await assert.rejects(read({ BROKER_KUBERNETES_REFERENCE_CALLERS: agent, BROKER_PID_REFERENCE_CALLERS: `${zt},${agent}` }), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.problems.length, 2, e.message);
      assert.match(e.message, /BROKER_KUBERNETES_REFERENCE_CALLERS entry "spiffe:\/\/cluster.local\/ns\/istio-system\/sa\/agent" is not on BROKER_ALLOWED_CALLERS/);
      assert.match(e.message, /BROKER_PID_REFERENCE_CALLERS entry/);
      return true;
    });
  });
});
