/**
 * The CNI registration socket's answers to bad input, over a real Unix socket. (Registration of
 * real pods, with the pod looked up in the devcluster, is in broker-e2e.test.ts.)
 */
import assert from 'node:assert/strict';
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { silentLogger } from '../../src/core/log.js';
import { BrokerError, NodePods, parseCniAddEvent, type AmbientPodView, type RegistrationServer, startRegistrationServer } from '../../src/broker/index.js';
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

describe('CNI registration server: POST /v1/ambient-add', () => {
  let dir: string;
  let server: RegistrationServer;
  let socket: string;
  const retained: string[] = [];
  const facts = (name: string, o: { uid?: string; nodeName?: string; hostNetwork?: boolean } = {}) => ({
    uid: o.uid ?? `uid-${name}`, namespace: 'mesh', name, serviceAccount: 'web', nodeName: o.nodeName ?? 'node-1',
    hostNetwork: o.hostNetwork ?? false, deleting: false, phase: 'Pending',
  });
  const views: Record<string, AmbientPodView> = {
    'mesh/web-1': { facts: facts('web-1'), labels: {}, annotations: {}, namespaceLabels: { 'istio.io/dataplane-mode': 'ambient' } },
    'mesh/host-1': { facts: facts('host-1', { hostNetwork: true }), labels: {}, annotations: {}, namespaceLabels: { 'istio.io/dataplane-mode': 'ambient' } },
    'mesh/away-1': { facts: facts('away-1', { nodeName: 'node-2' }), labels: {}, annotations: {}, namespaceLabels: { 'istio.io/dataplane-mode': 'ambient' } },
    'mesh/opt-out-1': { facts: facts('opt-out-1'), labels: { 'istio.io/dataplane-mode': 'none' }, annotations: {}, namespaceLabels: { 'istio.io/dataplane-mode': 'ambient' } },
  };
  const ask = (name: string, extra: Record<string, unknown> = {}) =>
    post(socket, '/v1/ambient-add', JSON.stringify({ event: { Netns: '/x', PodName: name, PodNamespace: 'mesh', IPs: null }, podUid: '', selectors: null, ...extra }));

  before(async () => {
    dir = tempDirSync('reg-amb-');
    socket = join(dir, 'pluginevent.sock');
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs: { retain: (id) => retained.push(id), release: () => undefined }, now: Date.now });
    server = await startRegistrationServer({
      socketPath: socket,
      pods,
      logger: silentLogger,
      lookup: async () => {
        throw new Error('the ambient path must not look anything up');
      },
      ambient: (ns, name) => views[`${ns}/${name}`],
    });
  });

  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('decides from the view and registers an ambient pod (its identity retained)', async () => {
    const r = await ask('web-1');
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.text), { known: true, ambient: true, registered: true });
    assert.deepEqual(retained, ['spiffe://cluster.local/ns/mesh/sa/web']);
  });

  it('not ambient (host network, opted out, or selectors that match nothing): nothing registered', async () => {
    for (const [name, extra] of [['host-1', {}], ['opt-out-1', {}], ['web-1', { selectors: [{ podSelector: { matchLabels: { app: 'x' } } }] }]] as const) {
      const r = await ask(name, extra);
      assert.deepEqual(JSON.parse(r.text), { known: true, ambient: false }, name);
    }
    assert.equal(retained.length, 1);
  });

  it('unknown pod, another UID, a pod of another node: {"known":false}', async () => {
    for (const [name, extra] of [['ghost-1', {}], ['web-1', { podUid: 'other' }], ['away-1', {}]] as const) {
      const r = await ask(name, extra);
      assert.equal(r.status, 200);
      assert.deepEqual(JSON.parse(r.text), { known: false }, name);
    }
  });

  it('malformed requests are 400 (bad selectors included), other methods 405', async () => {
    for (const body of ['nope', '{}', '{"event":5}', '{"event":{"PodName":"A_B","PodNamespace":"mesh"}}', '{"event":{"PodName":"web-1","PodNamespace":"mesh"},"podUid":7}']) {
      assert.equal((await post(socket, '/v1/ambient-add', body)).status, 400, body);
    }
    assert.equal((await ask('web-1', { selectors: [{ podSelector: { matchExpressions: [{ key: 'a', operator: 'Near' }] } }] })).status, 400);
    assert.equal((await post(socket, '/v1/ambient-add', '', 'GET')).status, 405);
  });
});
