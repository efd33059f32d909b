/**
 * `certbroker broker` as a process: configured only by environment variables (as the DaemonSet
 * does), serves a pod, drains on SIGTERM and exits 0 leaving no socket behind, and never writes
 * its token or a private key to its logs, even at debug level.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BrokerClient, firstMessage } from '../../src/broker/index.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack, TD } from './support/stack.js';

const RUN = fileURLToPath(new URL('../../src/broker/run.js', import.meta.url));

describe('certbroker broker process', () => {
  let stack: Stack;

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'broker-proc-', namespaces: ['shop'], serviceAccounts: ['shop/cart'] });
  });

  after(async () => {
    await stack?.close();
  });

  it('runs from env, serves, drains on SIGTERM and exits 0 without logging secrets', async () => {
    const apiToken = (stack.brokerKubeConfig.getCurrentUser()?.token ?? '') as string;
    assert.ok(apiToken.length > 20);
    const { env: brokerEnv, brokerSocket, cniSocket } = await stack.brokerEnv('proc');
    const env = {
      ...brokerEnv,
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'debug',
      // The Istio CA front from the environment, on a free port (the default is 127.0.0.1:15012).
      ISTIO_CA_FRONT_ADDRESS: '127.0.0.1:0',
      BROKER_SHUTDOWN_GRACE_SECONDS: '2',
    };
    const child = spawn(process.execPath, ['--input-type=module', '-e', `import(${JSON.stringify(RUN)}).then((m) => m.runBroker({}))`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
      const consumer = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
      for (let i = 0; i < 400 && !stderr.includes('own SVID ready'); i++) await new Promise((r) => setTimeout(r, 25));
      assert.ok(stderr.includes('own SVID ready'), stderr.slice(-2000));
      for (let i = 0; i < 400 && !stderr.includes('Istio CA front certificate ready'); i++) await new Promise((r) => setTimeout(r, 25));
      assert.match(stderr, /"msg":"Istio CA front listening".*"host":"127\.0\.0\.1","port":[1-9]/);
      assert.match(stderr, /"msg":"Istio CA front certificate ready".*"servingNames":\["localhost","127\.0\.0\.1"\]/);
      const client = new BrokerClient({ socketPath: brokerSocket, rootsPem: stack.ca.rootsPem(), certChainPem: consumer.certChainPem, privateKeyPem: consumer.privateKeyPem, trustDomain: TD });
      const msg = await firstMessage(client.subscribeX509Svid({ namespace: 'shop', name: 'cart-0' }));
      assert.equal(msg.svids[0]!.spiffe_id, `spiffe://${TD}/ns/shop/sa/cart`);
      const keyB64 = msg.svids[0]!.x509_svid_key.toString('base64').slice(0, 40);

      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr.slice(-2000));
      client.close();
      assert.equal(existsSync(brokerSocket), false, 'Broker API socket removed');
      assert.equal(existsSync(cniSocket), false, 'CNI socket removed');
      assert.match(stderr, /"msg":"shutting down"/);
      assert.match(stderr, /"msg":"node broker stopped"/);
      assert.ok(!stderr.includes(apiToken), 'API token not logged');
      assert.ok(!stderr.includes(keyB64), 'private key not logged');
      assert.ok(!/eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}\./.test(stderr), 'no JWT in the logs');
      assert.ok(!stderr.includes('PRIVATE KEY'), 'no PEM key in the logs');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
