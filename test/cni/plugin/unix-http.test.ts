/**
 * The plugin's one POST over a Unix socket (src/cni/plugin/unix-http.ts), against a real node:http
 * server on a real socket: the answer's status and body; an abort before the answer destroys the
 * request (the server sees its connection closed) and rejects; an already aborted signal never
 * connects; an answer cut off after the status line is marked interrupted; the abort listener is
 * gone once the call settled (a later abort changes nothing). And, against a raw socket server
 * that writes exactly the bytes a case gives: each way an HTTP/1.1 answer is framed (Content-Length
 * with the connection left open, chunked split across writes, to the close, after a 100 Continue),
 * the 1 MiB cap, and malformed answers refused with a clear error (not an interruption).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
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

describe('postOverUnixSocket against answers written byte for byte', () => {
  const scratch = Scratch.forFile('unix-http-raw-');
  const socketPath = join(scratch.dir, 'raw.sock');
  let server: NetServer;
  /** What the server writes once it has read the whole request (its head and Content-Length body). */
  let answer: (socket: Socket) => void = () => {};
  let lastRequest = '';

  before(async () => {
    server = createNetServer((socket) => {
      let got = '';
      socket.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        const end = got.indexOf('\r\n\r\n');
        const length = Number(/content-length: (\d+)/i.exec(got)?.[1] ?? 0);
        if (end >= 0 && got.length >= end + 4 + length) {
          lastRequest = got;
          answer(socket);
        }
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(socketPath, r));
  });
  after(async () => {
    await new Promise<void>((r) => server.close(() => r()));
  });
  const post = () => postOverUnixSocket(socketPath, '/v1/ambient-add', '{"pod":"é"}', new AbortController().signal);

  it('sends one HTTP/1.1 request: the method, path, content type, byte length, connection: close and the body', async () => {
    answer = (s) => s.end('HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n');
    assert.deepEqual(await post(), { status: 204, body: '' });
    const [head, body] = lastRequest.split('\r\n\r\n');
    const lines = head!.split('\r\n');
    assert.equal(lines[0], 'POST /v1/ambient-add HTTP/1.1');
    assert.ok(lines.includes('content-type: application/json'), head);
    assert.ok(lines.includes('content-length: 12'), head);
    assert.ok(lines.includes('connection: close'), head);
    assert.equal(Buffer.from(body!, 'latin1').toString('utf8'), '{"pod":"é"}');
  });

  it('a Content-Length answer resolves at its last byte, though the server keeps the connection open', async () => {
    answer = (s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"known"');
      setTimeout(() => s.write(':1}'), 10);
    };
    assert.deepEqual(await post(), { status: 200, body: '{"known":1}' });
  });

  it('chunked, split across writes (a chunk extension, the size line cut in two), and an answer read to the close', async () => {
    answer = (s) => {
      s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\n1');
      setTimeout(() => s.write('0\r\n0123456789abcdef\r\n0\r\n\r\n'), 10);
    };
    assert.deepEqual(await post(), { status: 200, body: 'abcd0123456789abcdef' });
    answer = (s) => s.end('HTTP/1.0 503 Service Unavailable\r\n\r\nnot yet');
    assert.deepEqual(await post(), { status: 503, body: 'not yet' });
  });

  it('a 100 Continue before the answer is skipped; a body past 1 MiB is kept to 1 MiB', async () => {
    answer = (s) => s.end('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    assert.deepEqual(await post(), { status: 200, body: 'ok' });
    const big = 1024 * 1024 + 10;
    answer = (s) => s.end(`HTTP/1.1 200 OK\r\ncontent-length: ${big}\r\n\r\n${'x'.repeat(big)}`);
    assert.equal((await post()).body.length, 1024 * 1024);
  });

  it('loads no node:http module (what it is there for): a fresh process posting once has no _http_* builtin loaded', async () => {
    answer = (s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    const moduleUrl = new URL('../../../src/cni/plugin/unix-http.js', import.meta.url).href;
    const script = `const { postOverUnixSocket } = await import(${JSON.stringify(moduleUrl)});
const a = await postOverUnixSocket(${JSON.stringify(socketPath)}, '/v1/ambient-add', '{}', new AbortController().signal);
console.log(JSON.stringify({ status: a.status, http: process.moduleLoadList.filter((m) => /_http_|\\bhttp\\b/.test(m)) }));`;
    const out = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['--input-type=module', '-e', script], (err, stdout) => (err ? reject(err) : resolve(stdout)));
    });
    assert.deepEqual(JSON.parse(out), { status: 200, http: [] });
  });

  it('malformed answers are refused with a clear error, not as interrupted; a close before any answer is not interrupted either', async () => {
    for (const bytes of ['SMTP ready\r\n\r\n', 'HTTP/1.1 200 OK\r\nno colon here\r\n\r\n', 'HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n']) {
      answer = (s) => s.end(bytes);
      const err = await post().then(() => assert.fail(`resolved: ${JSON.stringify(bytes)}`), (e: unknown) => e);
      assert.match(String(err), /broker answer malformed/, JSON.stringify(bytes));
      assert.equal(isInterrupted(err), false, JSON.stringify(bytes));
    }
    answer = (s) => s.end();
    const closed = await post().then(() => assert.fail('resolved'), (e: unknown) => e);
    assert.match(String(closed), /without an answer/);
    assert.equal(isInterrupted(closed), false);
    answer = (s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort');
    assert.ok(isInterrupted(await post().then(() => assert.fail('resolved'), (e: unknown) => e)), 'cut off inside the body');
  });
});
