/**
 * step-ca's HTTP API as the CA uses it: `POST <url>/1.0/sign` with a CSR and a one-time token
 * (step-ca 0.19's api/sign.go: `{csr, ott, notAfter}` in, `{crt, ca, certChain}` out, 201), and
 * `GET <url>/health`. Over HTTPS verified with the configured roots only, on a keep-alive agent
 * (one TLS handshake per connection, not per leaf). Every request has a deadline on the injected
 * clock: a step-ca that is down answers ERR_CA_STEP_CA_UNREACHABLE at once, one that accepts and
 * never answers ERR_CA_STEP_CA_TIMEOUT when the deadline fires (the socket is destroyed). step-ca's
 * error statuses become the codes of errors.ts (`StepCaErrorCode`); its error message goes to the
 * log only.
 */
import type { IncomingMessage } from 'node:http';
import { Agent, request } from 'node:https';
import type { Clock } from '../../core/clock.js';
import { deadline, isDeadlineError } from '../../core/deadline.js';
import { describeError } from '../../core/errors.js';
import { CaError, callCancelled, type StepCaErrorCode } from '../errors.js';

/** The sign path, also the token's audience (`<url>/1.0/sign`). */
export const STEP_CA_SIGN_PATH = '/1.0/sign';
export const STEP_CA_HEALTH_PATH = '/health';
/** Default per-request deadline. */
export const DEFAULT_STEP_CA_TIMEOUT_MS = 10_000;
/** A SignResponse is a few KiB; anything far larger is not one. */
const MAX_ANSWER_BYTES = 1 << 20;

export interface StepCaClientOptions {
  /** `https://host[:port][/prefix]`, no trailing slash needed. */
  readonly url: string;
  /** PEM roots that step-ca's TLS certificate must chain to. */
  readonly rootsPem: string;
  readonly timeoutMs?: number;
  readonly clock: Clock;
  /** Connections kept per step-ca (default 32). */
  readonly maxSockets?: number;
}

export interface StepCaSignBody {
  readonly csr: string;
  readonly ott: string;
  /** A Go duration relative to now (`86400s`). */
  readonly notAfter: string;
}

/** The leaf and the intermediates step-ca sent (nearest first), as PEM. */
export interface StepCaChain {
  readonly leafPem: string;
  readonly intermediatePems: readonly string[];
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

const STATUS_OF: Readonly<Record<StepCaErrorCode, CaError['status']>> = {
  ERR_CA_STEP_CA_BAD_REQUEST: 'invalid-argument',
  ERR_CA_STEP_CA_UNAUTHORIZED: 'failed-precondition',
  ERR_CA_STEP_CA_REFUSED: 'permission-denied',
  ERR_CA_STEP_CA_UNAVAILABLE: 'unavailable',
  ERR_CA_STEP_CA_UNREACHABLE: 'unavailable',
  ERR_CA_STEP_CA_TIMEOUT: 'unavailable',
  ERR_CA_STEP_CA_BAD_ANSWER: 'internal',
};

const PUBLIC_MESSAGE: Readonly<Record<StepCaErrorCode, string>> = {
  ERR_CA_STEP_CA_BAD_REQUEST: 'the upstream CA refused the request as invalid',
  ERR_CA_STEP_CA_UNAUTHORIZED: 'the upstream CA refused this CA\'s credentials',
  ERR_CA_STEP_CA_REFUSED: 'the upstream CA\'s policy refused this certificate',
  ERR_CA_STEP_CA_UNAVAILABLE: 'the upstream CA is unavailable',
  ERR_CA_STEP_CA_UNREACHABLE: 'the upstream CA is unreachable',
  ERR_CA_STEP_CA_TIMEOUT: 'the upstream CA did not answer in time',
  ERR_CA_STEP_CA_BAD_ANSWER: 'the upstream CA returned an unusable answer',
};

function stepCaError(code: StepCaErrorCode, message: string, cause?: unknown): CaError {
  return new CaError(code, message, { status: STATUS_OF[code], publicMessage: PUBLIC_MESSAGE[code], cause });
}

/** The code for a non-2xx status. */
export function codeForStatus(status: number): StepCaErrorCode {
  if (status === 400 || status === 404 || status === 413 || status === 422) return 'ERR_CA_STEP_CA_BAD_REQUEST';
  if (status === 401) return 'ERR_CA_STEP_CA_UNAUTHORIZED';
  if (status === 403) return 'ERR_CA_STEP_CA_REFUSED';
  return 'ERR_CA_STEP_CA_UNAVAILABLE';
}

/** step-ca's error body is `{"status":N,"message":"..."}`; its message, bounded, for the log. */
function errorMessage(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed === 'object' && parsed !== null && typeof (parsed as { message?: unknown }).message === 'string') {
      return (parsed as { message: string }).message.slice(0, 300);
    }
  } catch {
    // not JSON
  }
  return body.slice(0, 120);
}

function pemList(value: unknown): string[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.every((v): v is string => typeof v === 'string' && v !== '') ? value : undefined;
}

/** `certChain` (leaf first) when present, else `crt` and `ca` (older step-ca). */
export function parseSignAnswer(body: string, what: string): StepCaChain {
  let parsed: { certChain?: unknown; crt?: unknown; ca?: unknown };
  try {
    const value: unknown = JSON.parse(body);
    if (typeof value !== 'object' || value === null) throw new Error('not a JSON object');
    parsed = value;
  } catch (err) {
    throw stepCaError('ERR_CA_STEP_CA_BAD_ANSWER', `${what}: the answer is not JSON`, err);
  }
  const chain = pemList(parsed.certChain);
  if (chain && chain.length > 0) return { leafPem: chain[0]!, intermediatePems: chain.slice(1) };
  if (typeof parsed.crt === 'string' && parsed.crt !== '') {
    return { leafPem: parsed.crt, intermediatePems: typeof parsed.ca === 'string' && parsed.ca !== '' ? [parsed.ca] : [] };
  }
  throw stepCaError('ERR_CA_STEP_CA_BAD_ANSWER', `${what}: the answer has neither certChain nor crt`);
}

export class StepCaClient {
  readonly #o: StepCaClientOptions;
  readonly #base: string;
  readonly #agent: Agent;

  constructor(options: StepCaClientOptions) {
    this.#o = options;
    this.#base = options.url.replace(/\/+$/, '');
    this.#agent = new Agent({ keepAlive: true, maxSockets: options.maxSockets ?? 32, ca: options.rootsPem });
  }

  /** The token audience step-ca expects for signing. */
  get signAudience(): string {
    return this.#base + STEP_CA_SIGN_PATH;
  }

  /** Signs; throws a CaError with a StepCaErrorCode for every failure. `signal`: the caller gave up (the request is aborted, its connection closed). */
  async sign(body: StepCaSignBody, signal?: AbortSignal): Promise<StepCaChain> {
    const what = `step-ca POST ${this.signAudience}`;
    const answer = await this.#send('POST', STEP_CA_SIGN_PATH, JSON.stringify(body), what, signal);
    if (answer.status < 200 || answer.status > 299) {
      throw stepCaError(codeForStatus(answer.status), `${what}: ${answer.status} ${errorMessage(answer.body)}`);
    }
    return parseSignAnswer(answer.body, what);
  }

  /** Resolves when `GET /health` answers 200; throws like `sign`. */
  async health(): Promise<void> {
    const what = `step-ca GET ${this.#base}${STEP_CA_HEALTH_PATH}`;
    const answer = await this.#send('GET', STEP_CA_HEALTH_PATH, undefined, what);
    if (answer.status !== 200) throw stepCaError(codeForStatus(answer.status), `${what}: ${answer.status} ${errorMessage(answer.body)}`);
  }

  /** Closes the kept connections. */
  close(): void {
    this.#agent.destroy();
  }

  #send(method: 'GET' | 'POST', path: string, body: string | undefined, what: string, caller?: AbortSignal): Promise<Answer> {
    const limitMs = this.#o.timeoutMs ?? DEFAULT_STEP_CA_TIMEOUT_MS;
    const guard = deadline(limitMs, { what, clock: this.#o.clock, caller });
    const failed = (err: unknown): CaError => {
      if (caller?.aborted && guard.signal.reason === caller.reason) return callCancelled(what, err);
      if (isDeadlineError(err) || (guard.signal.aborted && isDeadlineError(guard.signal.reason))) {
        return stepCaError('ERR_CA_STEP_CA_TIMEOUT', `${what}: no answer within ${limitMs} ms`, err);
      }
      return stepCaError('ERR_CA_STEP_CA_UNREACHABLE', `${what}: ${describeError(err)}`, err);
    };
    return new Promise<Answer>((resolve, reject) => {
      const headers: Record<string, string> = { accept: 'application/json' };
      const payload = body === undefined ? undefined : Buffer.from(body, 'utf8');
      if (payload) {
        headers['content-type'] = 'application/json';
        headers['content-length'] = String(payload.length);
      }
      const onResponse = (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER_BYTES) res.destroy(new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`));
          else chunks.push(c);
        });
        res.on('error', (err) => reject(failed(guard.signal.aborted ? guard.signal.reason : err)));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      };
      const req = request(new URL(this.#base + path), { method, headers, agent: this.#agent, signal: guard.signal }, onResponse);
      req.on('error', (err) => reject(failed(guard.signal.aborted ? guard.signal.reason : err)));
      req.end(payload);
    }).finally(() => guard.dispose());
  }
}
