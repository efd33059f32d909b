/**
 * One HTTP/1.1 POST over a Unix socket for the plugin's calls to the node broker, with the
 * registration socket's method and content type (src/protocol/cni-event.ts), written and read
 * here on a `node:net` socket: the plugin is a short-lived process, and node:http's client
 * (agent, parser, outgoing and incoming message classes) cost it ~3-5 ms to load per ADD
 * (docs/benchmarks.md, CNI). The request says `connection: close`; the answer is read by its
 * Content-Length, chunked, or up to the close (RFC 9112 §6.3), 1xx interim answers skipped.
 * Resolves with the status and up to 1 MiB of the body; rejects with the socket error, a
 * malformed answer, or the signal's abort, the socket destroyed either way. An answer cut off
 * after its status line rejects with `interrupted` set (`isInterrupted`).
 */
import { connect } from 'node:net';
import { CNI_ADD_EVENT_CONTENT_TYPE, CNI_ADD_EVENT_METHOD } from '../../protocol/cni-event.js';

export interface UnixHttpAnswer {
  readonly status: number;
  readonly body: string;
}

const MAX_ANSWER_BYTES = 1024 * 1024;
/** The status line and header fields together; a longer head is refused. */
const MAX_HEAD_BYTES = 64 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');
const CRLF = Buffer.from('\r\n', 'latin1');

/** How the answer's body is delimited, from its head. */
type Framing = { readonly kind: 'length'; readonly length: number } | { readonly kind: 'chunked' } | { readonly kind: 'close' };

/** A malformed answer (never a socket error): not retried as an interruption. */
function malformed(what: string): Error {
  return new Error(`broker answer malformed: ${what}`);
}

/** The status and framing of one answer head (status line and fields, without the blank line). */
function parseHead(head: string): { readonly status: number; readonly framing: Framing } {
  const lines = head.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(lines[0] ?? '');
  if (!m) throw malformed('status line');
  let length: number | undefined;
  let chunked = false;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw malformed('header field');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'content-length') {
      if (!/^\d{1,15}$/.test(value) || (length !== undefined && length !== Number(value))) throw malformed('content-length');
      length = Number(value);
    } else if (name === 'transfer-encoding') chunked = /(?:^|,)\s*chunked\s*$/i.test(value);
  }
  const framing: Framing = chunked ? { kind: 'chunked' } : length !== undefined ? { kind: 'length', length } : { kind: 'close' };
  return { status: Number(m[1]), framing };
}

/**
 * The bytes of one answer as they arrive: `feed` returns the answer once it is complete (by
 * its framing), `end` once the connection closed. Throws a malformed-answer Error.
 */
class AnswerReader {
  #buffer: Buffer = Buffer.alloc(0);
  #head: { readonly status: number; readonly framing: Framing } | undefined;
  readonly #body: Buffer[] = [];
  #bodyBytes = 0;
  /** Chunked: the bytes left of the current chunk (and its CRLF), or undefined between chunks. */
  #chunkLeft: number | undefined;

  /** The status line has been read (a failure from now on cuts an answer off). */
  get started(): boolean {
    return this.#head !== undefined;
  }

  feed(data: Buffer): UnixHttpAnswer | undefined {
    this.#buffer = this.#buffer.length === 0 ? data : Buffer.concat([this.#buffer, data]);
    while (this.#head === undefined) {
      const end = this.#buffer.indexOf(HEAD_END);
      if (end < 0) {
        if (this.#buffer.length > MAX_HEAD_BYTES) throw malformed('head too long');
        return undefined;
      }
      const head = parseHead(this.#buffer.toString('latin1', 0, end));
      this.#buffer = this.#buffer.subarray(end + HEAD_END.length);
      // An interim answer (100 Continue and the like; never 101 here) is followed by the real one.
      if (head.status >= 200 || head.status === 101) this.#head = head;
    }
    return this.#take();
  }

  /** The connection closed: the answer if its framing allows that, else undefined (cut off). */
  end(): UnixHttpAnswer | undefined {
    return this.#head?.framing.kind === 'close' ? this.#answer() : undefined;
  }

  #take(): UnixHttpAnswer | undefined {
    const framing = this.#head!.framing;
    if (framing.kind === 'close') {
      this.#keep(this.#buffer);
      this.#buffer = Buffer.alloc(0);
      return undefined;
    }
    if (framing.kind === 'length') {
      const want = framing.length - this.#bodyBytes;
      this.#keep(this.#buffer.subarray(0, want));
      this.#buffer = this.#buffer.subarray(Math.min(want, this.#buffer.length));
      return this.#bodyBytes === framing.length ? this.#answer() : undefined;
    }
    return this.#chunks();
  }

  /** RFC 9112 §7.1: size line (extensions ignored), data, CRLF; a zero size ends it (trailers not read). */
  #chunks(): UnixHttpAnswer | undefined {
    for (;;) {
      if (this.#chunkLeft === undefined) {
        const eol = this.#buffer.indexOf(CRLF);
        if (eol < 0) {
          if (this.#buffer.length > 1024) throw malformed('chunk size line');
          return undefined;
        }
        const size = /^([0-9a-fA-F]{1,8})(?:;.*)?$/.exec(this.#buffer.toString('latin1', 0, eol).trim());
        if (!size) throw malformed('chunk size');
        this.#buffer = this.#buffer.subarray(eol + CRLF.length);
        const n = parseInt(size[1]!, 16);
        if (n === 0) return this.#answer();
        this.#chunkLeft = n + CRLF.length;
      }
      const data = Math.max(0, this.#chunkLeft - CRLF.length);
      const take = Math.min(this.#chunkLeft, this.#buffer.length);
      this.#keep(this.#buffer.subarray(0, Math.min(take, data)));
      this.#buffer = this.#buffer.subarray(take);
      this.#chunkLeft -= take;
      if (this.#chunkLeft > 0) return undefined;
      this.#chunkLeft = undefined;
    }
  }

  #keep(part: Buffer): void {
    const room = MAX_ANSWER_BYTES - Math.min(this.#bodyBytes, MAX_ANSWER_BYTES);
    if (room > 0 && part.length > 0) this.#body.push(Buffer.from(part.subarray(0, room)));
    this.#bodyBytes += part.length;
  }

  #answer(): UnixHttpAnswer {
    return { status: this.#head!.status, body: Buffer.concat(this.#body).toString('utf8') };
  }
}

export function postOverUnixSocket(socketPath: string, path: string, body: string, signal: AbortSignal): Promise<UnixHttpAnswer> {
  return new Promise<UnixHttpAnswer>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const payload = Buffer.from(body, 'utf8');
    const head = `${CNI_ADD_EVENT_METHOD} ${path} HTTP/1.1\r\nhost: unix\r\ncontent-type: ${CNI_ADD_EVENT_CONTENT_TYPE}\r\ncontent-length: ${payload.length}\r\nconnection: close\r\n\r\n`;
    const reader = new AnswerReader();
    const socket = connect(socketPath);
    let settled = false;
    const settle = (done: () => void) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      socket.destroy();
      done();
    };
    const fail = (err: Error) => settle(() => reject(reader.started ? Object.assign(err, { interrupted: true }) : err));
    const onAbort = () => settle(() => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted')));
    signal.addEventListener('abort', onAbort, { once: true });
    // Not end(): a node:http server aborts a request whose client half-closed before the answer.
    socket.once('connect', () => socket.write(Buffer.concat([Buffer.from(head, 'latin1'), payload])));
    socket.on('data', (data: Buffer) => {
      let answer: UnixHttpAnswer | undefined;
      try {
        answer = reader.feed(data);
      } catch (err) {
        return settle(() => reject(err));
      }
      if (answer) settle(() => resolve(answer));
    });
    socket.once('end', () => {
      const answer = reader.end();
      if (answer) settle(() => resolve(answer));
      else fail(new Error(reader.started ? 'broker answer cut off' : 'broker closed the connection without an answer'));
    });
    socket.once('error', fail);
  });
}

/** The answer was cut off after the status line (the error then carries `interrupted`). */
export function isInterrupted(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { interrupted?: unknown }).interrupted === true;
}
