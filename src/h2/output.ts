/**
 * The engine's output to one socket: frames are gathered and written as one buffer per input
 * chunk processed or per microtask (so a response's HEADERS, DATA and trailers, or every ack a
 * chunk of frames asks for, go out in one write). When the peer does not take what we write
 * (the socket's buffer past `pauseBytes`, e.g. a PING flood whose acks it never reads), reading
 * its input stops until the buffer drains: our output per connection stays bounded. `onWrite`
 * runs after each write (the connection counts the window it gave back as sent only then).
 */
import type { Socket } from 'node:net';

export class Output {
  readonly #socket: Socket;
  readonly #pauseBytes: number;
  #parts: Buffer[] = [];
  #queued = false;
  #paused = false;
  readonly #onWrite: () => void;

  constructor(socket: Socket, pauseBytes: number, onWrite: () => void) {
    this.#socket = socket;
    this.#pauseBytes = pauseBytes;
    this.#onWrite = onWrite;
    socket.on('drain', () => {
      if (!this.#paused) return;
      this.#paused = false;
      socket.resume();
    });
  }

  /** Appends bytes to the next write (at the latest at the end of this microtask). */
  queue(bytes: Buffer): void {
    this.#parts.push(bytes);
    if (!this.#queued) {
      this.#queued = true;
      queueMicrotask(this.flush);
    }
  }

  /** Writes what is gathered now. */
  readonly flush = (): void => {
    this.#queued = false;
    const parts = this.#parts;
    if (parts.length === 0 || this.#socket.destroyed) return;
    this.#parts = [];
    this.#socket.write(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
    this.#onWrite();
    if (!this.#paused && this.#socket.writableLength > this.#pauseBytes) {
      this.#paused = true;
      this.#socket.pause();
    }
  };
}
