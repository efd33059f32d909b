import { test } from 'node:test';
import assert from 'node:assert/strict';
import { credentials, Server, ServerCredentials, status, type Client, type ChannelCredentials, type ServiceError, type ClientReadableStream } from '@grpc/grpc-js';
import { bindServer, HealthService, loadProtos, lookup, stopServer } from '../../src/grpc/index.js';

type Unary = (req: unknown, cb: (err: ServiceError | null, res?: { status: string }) => void) => void;
type HealthClient = Client & { Check: Unary; Watch: (req: unknown) => ClientReadableStream<{ status: string }> };

async function start(health: HealthService): Promise<{ server: Server; client: HealthClient }> {
  const server = new Server();
  health.addToServer(server);
  const port = await bindServer(server, '127.0.0.1:0', ServerCredentials.createInsecure());
  const Ctor = lookup<new (a: string, c: ChannelCredentials) => HealthClient>(loadProtos(['grpc/health/v1/health.proto']).grpcObject, 'grpc.health.v1.Health');
  return { server, client: new Ctor(`127.0.0.1:${port}`, credentials.createInsecure()) };
}

test('Check answers the current status; unknown services are NOT_FOUND', async () => {
  const health = new HealthService({ '': 'NOT_SERVING', svc: 'SERVING' });
  const { server, client } = await start(health);
  const check = (service: string) => new Promise<{ status: string } | ServiceError>((resolve) => client.Check({ service }, (e, r) => resolve(e ?? r!)));
  assert.deepEqual(await check(''), { status: 'NOT_SERVING' });
  assert.deepEqual(await check('svc'), { status: 'SERVING' });
  assert.equal(((await check('other')) as ServiceError).code, status.NOT_FOUND);
  health.setStatus('', 'SERVING');
  assert.deepEqual(await check(''), { status: 'SERVING' });
  client.close();
  await stopServer(server, 1000);
});

test('Watch sends the current status at once, then each change; shutdown ends the stream', async () => {
  const health = new HealthService({ '': 'NOT_SERVING' });
  const { server, client } = await start(health);
  const seen: string[] = [];
  const stream = client.Watch({ service: '' });
  const ended = new Promise<void>((resolve) => {
    stream.on('end', () => resolve());
    stream.on('error', () => resolve());
  });
  await new Promise<void>((resolve) => {
    stream.on('data', (m: { status: string }) => {
      seen.push(m.status);
      if (seen.length === 1) health.setStatus('', 'SERVING');
      if (seen.length === 2) health.shutdown();
      if (seen.length === 3) resolve();
    });
  });
  await ended;
  assert.deepEqual(seen, ['NOT_SERVING', 'SERVING', 'NOT_SERVING']);
  client.close();
  assert.equal(await stopServer(server, 1000), 'graceful');
});

test('stopServer forces after the deadline when a call never finishes', async () => {
  const health = new HealthService({ '': 'SERVING' });
  const { server, client } = await start(health);
  const stream = client.Watch({ service: '' }); // an open stream keeps tryShutdown waiting
  stream.on('error', () => undefined);
  await new Promise<void>((resolve) => stream.once('data', () => resolve()));
  assert.equal(await stopServer(server, 50), 'forced');
  client.close();
});
