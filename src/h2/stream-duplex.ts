/**
 * A node `Duplex` over one engine stream, for the few places that pipe streams (the CA's
 * loopback relay of health Watch/List and reflection): readable = the request body, with the
 * stream's window given back only as the reader takes data (real backpressure); writable = the
 * response body as DATA (after `respond`), ended with the trailers `trailers()` gives at the end.
 * A stream reset destroys the Duplex (no error event); destroying the Duplex resets the stream
 * (CANCEL).
 * The hot path (unary calls) does not use it.
 */
import { Duplex } from 'node:stream';
import { ErrorCode } from './frames.js';
import type { H2Stream, HeaderBlock } from './stream.js';

export class H2StreamDuplex extends Duplex {
  readonly stream: H2Stream;
  readonly #trailers: () => HeaderBlock | undefined;
  /** Bytes pushed but not yet returned to the peer's window. */
  #owed = 0;
  #wantMore = true;

  constructor(stream: H2Stream, trailers: () => HeaderBlock | undefined) {
    super({ allowHalfOpen: true });
    this.stream = stream;
    this.#trailers = trailers;
    stream.manualFlowControl();
    stream.ondata = (chunk) => {
      this.#owed += chunk.length;
      // Copied: the chunk is a view into a socket buffer.
      this.#wantMore = this.push(Buffer.from(chunk));
      if (this.#wantMore) this.#giveBack();
    };
    stream.onend = () => {
      this.push(null);
    };
    stream.onClose((code) => {
      // A reset ends the Duplex without an error event: the stream's own close says why.
      if (code !== ErrorCode.NO_ERROR) this.destroy();
      else if (!this.readableEnded) this.push(null);
    });
  }

  #giveBack(): void {
    if (this.#owed === 0) return;
    this.stream.consume(this.#owed);
    this.#owed = 0;
  }

  override _read(): void {
    this.#wantMore = true;
    this.#giveBack();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.stream.write(chunk);
    done();
  }

  override _final(done: (err?: Error | null) => void): void {
    this.stream.end(this.#trailers());
    done();
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    if (!this.stream.closed) this.stream.reset(ErrorCode.CANCEL);
    done(err);
  }
}
