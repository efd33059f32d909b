/**
 * The CA client after a CA outage, against the real CA (TLS, TokenReview) reached through a
 * loopback TCP relay the test switches between down (every connection reset on arrival, as a
 * load balancer with no backend does) and up (relayed to the CA). The relay counts connection
 * attempts, so the test knows that grpc-js's own reconnect backoff has grown (1 s, 1.6 s, 2.6 s,
 * 4.1 s ...) before the CA comes back.
 */
import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CaCallError, IstioCaClient } from '../../src/broker/index.js';
import { BROKER_NS, CONSUMER_SA, Stack, TD, tokenFor } from './support/stack.js';

class Relay {
  attempts = 0;
  down = false;
  readonly #sockets = new Set<Socket>();
  readonly #server: Server;
  port = 0;

  constructor(private readonly targetPort: number) {
    this.#server = createServer((client) => {
      this.attempts++;
      if (this.down) {
        client.resetAndDestroy();
        return;
      }
      const upstream = connect(this.targetPort, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as { port: number }).port;
  }

  /** Goes down: open connections are reset, new ones are reset on arrival. */
  goDown(): void {
    this.down = true;
    for (const s of this.#sockets) s.resetAndDestroy();
  }

  async close(): Promise<void> {
    this.goDown();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

describe('IstioCaClient after a CA outage (real CA through a relay)', () => {
  let stack: Stack;
  let relay: Relay;
  let client: IstioCaClient;
  const identity = `spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}`;

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'ca-client-reconnect-', namespaces: [], serviceAccounts: [] });
    relay = new Relay(stack.caPort);
    await relay.listen();
    const token = await tokenFor(stack.core, BROKER_NS, CONSUMER_SA, { audience: 'istio-ca', expirationSeconds: 3600 });
    client = new IstioCaClient(stack.caClientOptions(token, `127.0.0.1:${relay.port}`));
  });

  after(async () => {
    client?.close();
    await relay?.close();
    await stack?.close();
  });

  it('the first call after the CA is back reaches it (one fresh connection), not a stale error from the backoff window', async () => {
    const signal = new AbortController().signal;
    assert.equal((await client.fetchCertificate(identity, signal)).identity, identity);

    relay.goDown();
    const downFrom = relay.attempts;
    const errors: string[] = [];
    // Fail calls until four connection attempts reached the relay: grpc-js has then backed off
    // 1 s, 1.6 s and 2.6 s, and its current backoff (about 4 s) has just started.
    while (relay.attempts - downFrom < 4) {
      await assert.rejects(client.fetchCertificate(identity, signal), (err: unknown) => {
        assert.ok(err instanceof CaCallError, String(err));
        errors.push(err.grpcCode);
        return true;
      });
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(errors.every((c) => c === 'UNAVAILABLE'), errors.join(','));

    relay.down = false;
    const before = relay.attempts;
    const cert = await client.fetchCertificate(identity, signal);
    assert.equal(cert.identity, identity);
    assert.ok(cert.notAfter > Date.now());
    assert.equal(relay.attempts, before + 1, 'exactly one new connection');
  });
});
