/**
 * The plugin's one POST over a Unix socket (src/cni/plugin/unix-http.ts), against a real node:http
 * server on a real socket: the answer's status and body; an abort before the answer destroys the
 * request (the server sees its connection closed) and rejects; an already aborted signal never
 * connects; an answer cut off after the status line is marked interrupted; the abort listener is
 * gone once the call settled (a later abort changes nothing).
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isInterrupted, postOverUnixSocket } from '../../../src/cni/plugin/unix-http.js';
import { Scratch } from '../../support/scratch.js';

describe('postOverUnixSocket', () => {
  const scratch = Scratch.forFile('unix-http-');
  const socketPath = join(scratch.dir, 'b.sock');
  let server: Server;
  let connections = 0;
  let closedConnections = 0;
  let handle: (req: IncomingMessage, res: ServerResponse, body: string) => void = () => {};

  before(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => handle(req, res, body));
    });
    server.on('connection', (s) => {
      connections++;
      s.on('close', () => closedConnections++);
    });
    await new Promise<void>((r) => server.listen(socketPath, r));
  });
  after(async () => {
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('answers the status and body, with the registration content type and the body sent', async () => {
    handle = (req, res, body) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ got: body, type: req.headers['content-type'], method: req.method, url: req.url }));
    };
    const answer = await postOverUnixSocket(socketPath, '/v1/ambient-add', '{"a":1}', new AbortController().signal);
    assert.equal(answer.status, 201);
    assert.deepEqual(JSON.parse(answer.body), { got: '{"a":1}', type: 'application/json', method: 'POST', url: '/v1/ambient-add' });
  });

  it('an abort before the answer rejects and closes the connection; an aborted signal never connects', async () => {
    handle = () => {}; // never answers
    const before = connections;
    const closedBefore = closedConnections;
    const ac = new AbortController();
    const call = postOverUnixSocket(socketPath, '/x', '{}', ac.signal);
    while (connections === before) await new Promise((r) => setTimeout(r, 5));
    ac.abort(new Error('budget over'));
    await assert.rejects(call, /budget over/);
    while (closedConnections === closedBefore) await new Promise((r) => setTimeout(r, 5));

    const aborted = AbortSignal.abort(new Error('already over'));
    const connectionsNow = connections;
    await assert.rejects(postOverUnixSocket(socketPath, '/x', '{}', aborted), /already over/);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(connections, connectionsNow, 'no connection for an aborted signal');
  });

  it('an answer cut off after the status line is interrupted; an abort after an answer changes nothing', async () => {
    handle = (_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial');
      setTimeout(() => res.socket?.destroy(), 20);
    };
    const err = await postOverUnixSocket(socketPath, '/x', '{}', new AbortController().signal).then(
      () => assert.fail('resolved'),
      (e: unknown) => e,
    );
    assert.ok(isInterrupted(err), String(err));

    handle = (_req, res) => res.end('ok');
    const ac = new AbortController();
    const answer = await postOverUnixSocket(socketPath, '/x', '{}', ac.signal);
    ac.abort(new Error('late'));
    assert.equal(answer.body, 'ok');
  });
});
