/**
 * One server-side HTTP/2 connection of certbroker's engine (RFC 9113) over an established
 * socket (TLS with ALPN h2, or plain TCP in tests): the client preface, frames parsed in place
 * from the socket's chunks (a frame split across chunks is joined), the connection's part of
 * the stream state machine (odd, increasing client stream ids; idle/open/half-closed/closed),
 * flow control both ways, SETTINGS/PING/GOAWAY (DATA in receive-data.ts; WINDOW_UPDATE, PRIORITY
 * and RST_STREAM in stream-control.ts; HEADERS and CONTINUATION, up to a request's checks, in
 * header-block.ts), and the DoS guards: budgets for cheap frames and resets (flood-guard.ts),
 * bounded header blocks (header-block.ts), bounded pending input, reading paused
 * while our output is not being read, and our SETTINGS acknowledged within
 * `H2Timeouts.settingsAckMs` (§6.5.3: else GOAWAY SETTINGS_TIMEOUT).
 *
 * Errors follow §5.4: a stream error resets that stream; a connection error sends GOAWAY with
 * its code and closes (one step). A graceful close (`close()`: server shutdown, idle timeout) is
 * two steps (§6.8): GOAWAY with last stream id 2^31-1 and a PING, then, on the PING's ACK (or
 * after `H2Timeouts.drainPingMs`), the final GOAWAY with the real last stream id: streams the
 * client opened before it saw the first GOAWAY are still served. Timers are cleared on close. Output is gathered and written once per input chunk or per microtask, so
 * a whole response (HEADERS + DATA + trailers) is one socket write.
 */
import type { Socket } from 'node:net';
import type { Clock } from '../core/clock.js';
import { DEFAULT_MAX_FRAME_SIZE, ErrorCode, Flag, frameOf, FrameType, goawayFrame, H2ConnectionError, MAX_WINDOW, pingAckFrame, rstStreamFrame, SETTINGS_ACK } from './frames.js';
import { DEFAULT_GUARDS, FloodGuard, RecentIds, type H2Guards } from './flood-guard.js';
import { receiveContinuation, receiveHeaders, refuse, type BlockAssembly, type HeaderHost } from './header-block.js';
import { HpackDecoder, HpackEncoder } from './hpack.js';
import { FrameReader } from './frame-reader.js';
import { Output } from './output.js';
import type { FieldCollector } from './request-headers.js';
import { applyPeerSettings, DEFAULT_H2_TIMEOUTS, defaultPeerSettings, serverPreface, type H2Settings, type H2Timeouts } from './settings.js';
import { H2Stream, type HeaderBlock, type HeaderFields, type StreamHost } from './stream.js';
import { applyCredits, receiveData, type FlowAccount } from './receive-data.js';
import { receivePriority, receiveRstStream, receiveWindowUpdate, resume, type StreamControl } from './stream-control.js';

export interface H2ConnectionOptions {
  readonly settings: H2Settings;
  readonly guards?: Partial<H2Guards>;
  readonly timeouts?: Partial<H2Timeouts>;
  readonly clock: Clock;
  /** A request's HEADERS arrived: the stream is open (set its callbacks now). */
  readonly onStream: (stream: H2Stream) => void;
  /** A connection error (peer-caused or not), a socket error, or a throwing `onStream`. */
  readonly onError?: (err: Error) => void;
}

/** Stream ids we reset or refused, remembered so frames the client had in flight are ignored (§5.4.2). */
const RECENT_RESETS = 64;
const NO_FIELDS: HeaderFields = Object.freeze([]);
/** The opaque bytes of the graceful close's PING (§6.8): its ACK says the first GOAWAY was read. */
const DRAIN_PING = Buffer.from('h2-drain', 'latin1');

export class H2Connection implements StreamHost, FlowAccount, StreamControl, HeaderHost {
  readonly #socket: Socket;
  readonly #o: H2ConnectionOptions;
  readonly #guards: H2Guards;
  readonly #timeouts: H2Timeouts;
  readonly #decoder: HpackDecoder;
  readonly #encoder = new HpackEncoder();
  readonly #streams = new Map<number, H2Stream>();
  readonly #blocked = new Set<H2Stream>();
  readonly #peer = defaultPeerSettings();
  readonly #control: FloodGuard;
  readonly #resets: FloodGuard;
  readonly #recentResets = new RecentIds(RECENT_RESETS);
  readonly #recentClosed = new RecentIds(RECENT_RESETS);
  /** @internal The highest client stream id used so far (written by header-block.ts). */
  lastStreamId = 0;
  readonly #reader = new FrameReader((buf, at, length, type, flags, sid) => this.#frame(buf, at, length, type, flags, sid), () => this.#destroyed || this.#ended);
  #settingsSeen = false;
  #assembly: BlockAssembly | undefined;
  readonly #output: Output;
  /** The first GOAWAY of a graceful close is out (last stream id 2^31-1): new streams are still served. */
  #draining = false;
  #drainTimer: NodeJS.Timeout | undefined;
  /** Our SETTINGS not acknowledged yet (§6.5.3). */
  #settingsTimer: NodeJS.Timeout | undefined;
  /** The final GOAWAY sent: streams above `#goawayLastId` are ignored; `#closing`: end once none is open. */
  #goawaySent = false;
  #goawayLastId = 0;
  #closing = false;
  #destroyed = false;
  #ended = false;
  #closeListeners: Array<() => void> = [];
  connectionWindow = 65_535;
  recvWindow = 65_535;
  recvUnacked = 0;
  recvCredit = 0;
  #credited: H2Stream[] = [];
  peerMaxFrameSize = DEFAULT_MAX_FRAME_SIZE;
  readonly streamWindow: number;
  readonly connectionWindowTarget: number;
  readonly maxBlockBytes: number;
  readonly maxBlockFrames: number;
  /** The peer's address (kept: the socket forgets it once closed). */
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;

  constructor(socket: Socket, o: H2ConnectionOptions) {
    this.#socket = socket;
    this.#o = o;
    this.#guards = { ...DEFAULT_GUARDS, ...o.guards };
    this.#timeouts = { ...DEFAULT_H2_TIMEOUTS, ...o.timeouts };
    this.streamWindow = o.settings.initialWindowSize;
    this.connectionWindowTarget = o.settings.connectionWindowSize;
    this.maxBlockBytes = 2 * o.settings.maxHeaderListSize + 4096;
    this.maxBlockFrames = this.#guards.maxBlockFrames;
    this.remoteAddress = socket.remoteAddress;
    this.remotePort = socket.remotePort;
    this.#decoder = new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: o.settings.maxHeaderListSize });
    this.#control = new FloodGuard(o.clock, this.#guards.controlFramesPerSecond, 1000);
    this.#resets = new FloodGuard(o.clock, this.#guards.resetsPerSecond, 1000);
    this.recvWindow = Math.max(65_535, o.settings.connectionWindowSize);
    // A window given back counts once its WINDOW_UPDATE is written, not when it is queued.
    this.#output = new Output(socket, this.#guards.pauseOutputBytes, () => (this.#credited = applyCredits(this, this.#credited)));
    this.queue(serverPreface(o.settings));
    this.#output.flush();
    const ackMs = this.#timeouts.settingsAckMs;
    this.#settingsTimer = setTimeout(() => this.#fail(new H2ConnectionError(ErrorCode.SETTINGS_TIMEOUT, `SETTINGS not acknowledged within ${ackMs} ms`)), ackMs);
    this.#settingsTimer.unref();
    socket.on('data', this.#onData);
    socket.on('error', (err) => this.#o.onError?.(err));
    socket.once('close', () => this.#closed());
  }

  /** Streams open now. */
  get openStreams(): number {
    return this.#streams.size;
  }
  /** Closing (a GOAWAY sent, the first of a graceful close included) or gone. */
  get closed(): boolean {
    return this.#closing || this.#draining || this.#destroyed;
  }
  get destroyed(): boolean {
    return this.#destroyed;
  }

  /** Calls `listener` once the socket is gone. */
  onClose(listener: () => void): void {
    if (this.#destroyed) listener();
    else this.#closeListeners.push(listener);
  }

  /**
   * Graceful close, two steps (§6.8): GOAWAY(NO_ERROR, 2^31-1) and a PING now; on its ACK (or
   * after `drainPingMs`) the final GOAWAY with the last stream id; open streams finish, then the
   * socket ends.
   */
  close(): void {
    if (this.#destroyed || this.#draining || this.#goawaySent) return;
    this.#draining = true;
    this.queue(goawayFrame(MAX_WINDOW, ErrorCode.NO_ERROR, ''));
    this.queue(frameOf(FrameType.PING, 0, 0, DRAIN_PING));
    this.#drainTimer = setTimeout(() => this.#finalGoaway(), this.#timeouts.drainPingMs);
    this.#drainTimer.unref();
  }

  /** The last step of a close (or the only one when the client went away): GOAWAY with the last stream id. */
  #finalGoaway(): void {
    clearTimeout(this.#drainTimer);
    if (this.#destroyed || this.#goawaySent) return;
    this.#sendGoaway(ErrorCode.NO_ERROR, '');
    this.#closing = true;
    if (this.#streams.size === 0) this.#end();
  }

  /** Drops the connection now (open streams hear CANCEL). */
  destroy(): void {
    this.#socket.destroy();
  }

  encode(head: HeaderBlock): Uint8Array {
    return head instanceof Uint8Array ? this.#encoder.encode(NO_FIELDS, head) : this.#encoder.encode(head);
  }

  queue(bytes: Buffer): void {
    this.#output.queue(bytes);
  }

  blocked(stream: H2Stream): void {
    this.#blocked.add(stream);
  }

  streamClosed(stream: H2Stream, _code: number, rst: number | undefined): void {
    if (rst !== undefined) this.rst(stream.id, rst);
    this.#recentClosed.add(stream.id);
    this.#streams.delete(stream.id);
    this.#blocked.delete(stream);
    if (this.#closing && this.#streams.size === 0) this.#end();
  }

  readonly #onData = (chunk: Buffer): void => {
    if (this.#destroyed) return;
    try {
      this.#reader.read(chunk);
    } catch (err) {
      this.#connectionError(err);
    }
    this.#output.flush();
  };

  credited(stream: H2Stream): void {
    this.#credited.push(stream);
  }

  #frame(buf: Buffer, at: number, length: number, type: number, flags: number, sid: number): void {
    if (this.#assembly && type !== FrameType.CONTINUATION) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'frame inside a header block');
    if (!this.#settingsSeen && (type !== FrameType.SETTINGS || flags & Flag.ACK)) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'the preface must be followed by SETTINGS');
    switch (type) {
      case FrameType.DATA:
        return receiveData(this, this.#streams, buf, at, length, flags, sid);
      case FrameType.HEADERS:
        this.#assembly = receiveHeaders(this, this.#streams, this.#decoder, buf, at, length, flags, sid);
        return;
      case FrameType.PRIORITY:
        return receivePriority(this, this.#streams, buf, at, length, sid);
      case FrameType.RST_STREAM:
        return receiveRstStream(this, this.#streams, buf, at, length, sid);
      case FrameType.SETTINGS:
        return this.#settings(buf, at, length, flags, sid);
      case FrameType.PUSH_PROMISE:
        throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      case FrameType.PING:
        return this.#ping(buf, at, length, flags, sid);
      case FrameType.GOAWAY:
        if (sid !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'GOAWAY on a stream');
        if (length < 8) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'GOAWAY shorter than 8 bytes');
        // The client goes away (it opens nothing more): what it started finishes, then the connection ends.
        return this.#finalGoaway();
      case FrameType.WINDOW_UPDATE:
        return receiveWindowUpdate(this, this.#streams, this.#blocked, buf, at, length, sid);
      case FrameType.CONTINUATION:
        this.#assembly = receiveContinuation(this, this.#streams, this.#decoder, this.#assembly, buf, at, length, flags, sid);
        return;
      default:
        // Unknown frame types are ignored (§4.1, §5.5), within the cheap-frame budget.
        return this.chargeControl();
    }
  }

  /** @internal Counts a frame that carries no request; past the budget: ENHANCE_YOUR_CALM. */
  chargeControl(): void {
    if (!this.#control.charge()) throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'too many control frames');
  }

  /** @internal The stream id is not open yet (§5.1: idle). */
  isIdle(sid: number): boolean {
    return sid > this.lastStreamId;
  }

  /**
   * @internal Frames on a stream we reset, or above the final GOAWAY's last stream id, are
   * ignored (§5.4.2, §6.8); on other closed ones they are a stream error.
   */
  closedStreamFrame(sid: number): void {
    if (this.#goawaySent && sid > this.#goawayLastId) return;
    if (!this.#recentResets.has(sid)) this.rst(sid, ErrorCode.STREAM_CLOSED);
  }

  /** @internal RST_STREAM for `sid`, remembered so frames the client had in flight are ignored. */
  rst(sid: number, code: number): void {
    this.#recentResets.add(sid);
    this.queue(rstStreamFrame(sid, code));
  }

  /** @internal Counts a stream reset before its answer; false past the reset budget. */
  chargeReset(): boolean {
    return this.#resets.charge();
  }

  /** @internal The stream id was reset by us lately. */
  wasReset(sid: number): boolean {
    return this.#recentResets.has(sid);
  }

  /** @internal The stream id was used by a stream that ended lately. */
  wasClosed(sid: number): boolean {
    return this.#recentClosed.has(sid);
  }

  /** @internal */
  get goawaySent(): boolean {
    return this.#goawaySent;
  }

  /** @internal A request passed header-block.ts's checks: its stream opens, unless past SETTINGS_MAX_CONCURRENT_STREAMS. */
  openStream(sid: number, collector: FieldCollector, endStream: boolean): void {
    if (this.#streams.size >= this.#o.settings.maxConcurrentStreams) return refuse(this, sid, ErrorCode.REFUSED_STREAM);
    const declared = collector.contentLength();
    const stream = new H2Stream(this, sid, collector.fields, declared, this.#o.settings.initialWindowSize, this.#peer.initialWindowSize);
    this.#streams.set(sid, stream);
    try {
      this.#o.onStream(stream);
    } catch (err) {
      this.#o.onError?.(err as Error);
      stream.reset(ErrorCode.INTERNAL_ERROR);
    }
    if (endStream && !stream.closed) {
      if (declared > 0) stream.reset(ErrorCode.PROTOCOL_ERROR);
      else stream.remoteEnd();
    }
  }

  #settings(buf: Buffer, at: number, length: number, flags: number, sid: number): void {
    if (sid !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & Flag.ACK) {
      if (length !== 0) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      // We send SETTINGS once (the preface): its ACK stops the §6.5.3 timer; later ACKs mean nothing.
      clearTimeout(this.#settingsTimer);
      this.#settingsTimer = undefined;
      return this.chargeControl();
    }
    if (this.#settingsSeen) this.chargeControl();
    this.#settingsSeen = true;
    const tableSize = this.#peer.headerTableSize;
    const delta = applyPeerSettings(this.#peer, buf, at, length);
    if (this.#peer.headerTableSize !== tableSize) this.#encoder.peerTableSizeChanged();
    this.peerMaxFrameSize = this.#peer.maxFrameSize;
    this.queue(SETTINGS_ACK);
    if (delta === 0) return;
    for (const s of this.#streams.values()) {
      s.sendWindow += delta;
      if (s.sendWindow > MAX_WINDOW) throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'stream window above 2^31-1');
    }
    if (delta > 0) resume(this, this.#blocked, [...this.#streams.values()]);
  }

  #ping(buf: Buffer, at: number, length: number, flags: number, sid: number): void {
    if (sid !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PING on a stream');
    if (length !== 8) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'PING length other than 8');
    this.chargeControl();
    if (!(flags & Flag.ACK)) return this.queue(pingAckFrame(buf, at));
    // The ACK of a graceful close's PING: the client has read the first GOAWAY (§6.8).
    if (this.#draining && buf.compare(DRAIN_PING, 0, 8, at, at + 8) === 0) this.#finalGoaway();
  }

  /** GOAWAY once, or a second time to say an error ended what a graceful close began. */
  #sendGoaway(code: number, debug: string): void {
    if (this.#goawaySent && code === ErrorCode.NO_ERROR) return;
    this.#goawaySent = true;
    this.#goawayLastId = this.lastStreamId;
    this.queue(goawayFrame(this.#goawayLastId, code, debug));
  }

  /** A connection error outside a read (a timer): as in a read, then the output is written. */
  #fail(err: H2ConnectionError): void {
    if (this.#destroyed || this.#ended) return;
    this.#connectionError(err);
  }

  /** §5.4.1: GOAWAY with the error's code, every stream ends, the socket closes. */
  #connectionError(err: unknown): void {
    const e = err instanceof H2ConnectionError ? err : new H2ConnectionError(ErrorCode.INTERNAL_ERROR, `internal error: ${(err as Error).message}`);
    this.#o.onError?.(e);
    this.#sendGoaway(e.h2code, e.message);
    this.#closing = true;
    this.#assembly = undefined;
    for (const s of [...this.#streams.values()]) s.abort(e.h2code);
    this.#end();
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#output.flush();
    this.#socket.end();
    // Gone once written, whether or not the peer closes its side.
    this.#socket.destroySoon();
  }

  #closed(): void {
    this.#destroyed = true;
    this.#closing = true;
    clearTimeout(this.#settingsTimer);
    clearTimeout(this.#drainTimer);
    for (const s of [...this.#streams.values()]) s.abort(ErrorCode.CANCEL);
    this.#streams.clear();
    this.#blocked.clear();
    const listeners = this.#closeListeners;
    this.#closeListeners = [];
    for (const l of listeners) l();
  }
}
