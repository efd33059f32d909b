/**
 * The CNI registration socket's answers to bad input, over a real Unix socket. (Registration of
 * real pods, with the pod looked up in the devcluster, is in broker-e2e.test.ts.)
 */
import assert from 'node:assert/strict';
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { silentLogger } from '../../src/core/log.js';
import { BrokerError, NodePods, parseCniAddEvent, type RegistrationServer, startRegistrationServer } from '../../src/broker/index.js';
import { requestUnix as post } from './support/unix-http.js';
import { tempDirSync } from '../support/scratch.js';

describe('CNI registration server', () => {
  let dir: string;
  let server: RegistrationServer;
  let socket: string;
  const lookups: string[] = [];

  before(async () => {
    dir = tempDirSync('reg-');
    socket = join(dir, 'run', 'pluginevent.sock');
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs: { retain: () => undefined, release: () => undefined }, now: Date.now });
    server = await startRegistrationServer({
      socketPath: socket,
      pods,
      logger: silentLogger,
      lookup: async (ns, name) => {
        lookups.push(`${ns}/${name}`);
        if (name === 'broken') throw new Error('apiserver unreachable');
        return undefined;
      },
    });
  });

  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('listens on a 0600 socket', async () => {
    assert.equal((await stat(socket)).mode & 0o777, 0o600);
  });

  it('answers 400 to malformed bodies without looking anything up', async () => {
    for (const body of ['', 'not json', '[]', '{}', '{"PodName":"a"}', '{"PodName":"A_B","PodNamespace":"x"}', '{"PodName":"a","PodNamespace":"x","IPs":"10.0.0.1"}']) {
      const r = await post(socket, '/cmdadd', body);
      assert.equal(r.status, 400, body);
    }
    assert.deepEqual(lookups, []);
  });

  it('answers 404 for an unknown pod, 503 when the lookup fails, 405/404 for other methods and paths, 413 for huge bodies', async () => {
    assert.equal((await post(socket, '/cmdadd', '{"PodName":"ghost","PodNamespace":"shop","Netns":"/x","IPs":null}')).status, 404);
    assert.equal((await post(socket, '/cmdadd', '{"PodName":"broken","PodNamespace":"shop"}')).status, 503);
    assert.equal((await post(socket, '/cmdadd', '', 'GET')).status, 405);
    assert.equal((await post(socket, '/other', '{}')).status, 404);
    assert.equal((await post(socket, '/cmdadd', JSON.stringify({ PodName: 'a', PodNamespace: 'b', Netns: 'x'.repeat(70_000) }))).status, 413);
  });

  it('parses Istio\'s event shape', () => {
    const e = parseCniAddEvent('{"Netns":"/var/run/netns/x","PodName":"web-0","PodNamespace":"shop","IPs":[{"Interface":0,"Address":{"IP":"10.0.0.5","Mask":"////AA=="},"Gateway":null}]}');
    assert.equal(e.PodName, 'web-0');
    assert.throws(() => parseCniAddEvent('{"PodName":5}'), (err: unknown) => err instanceof BrokerError && err.code === 'ERR_REGISTRATION_INVALID');
  });
});
