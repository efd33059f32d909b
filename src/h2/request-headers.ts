/**
 * Checking a request's (or its trailers') header fields as HPACK delivers them, per RFC 9113
 * §8.2-8.3: lowercase names of token characters, values without NUL/CR/LF or surrounding
 * whitespace, no connection-specific fields, `te` only `trailers`, pseudo-header fields first,
 * each once, only the request ones, and `:method`/`:scheme`/`:path` present (CONNECT:
 * `:authority` only). A violation makes the request malformed: the connection resets the
 * stream with PROTOCOL_ERROR (§8.1.1). Fields are gathered as node:http2 does
 * (`IncomingHttpHeaders`-shaped: a repeated name becomes an array), so the CA's gRPC code reads
 * both transports' headers alike.
 */

/** A request's fields: pseudo-header fields under their `:name`, a repeated field as an array. */
export type FieldMap = Record<string, string | string[] | undefined>;

/** Any byte outside a lowercase token (RFC 9113 §8.2.1: 0x00-0x20, 0x41-0x5a, 0x7f-0xff), or ':'. */
const BAD_NAME = /[^!#$%&'*+\-.^_`|~0-9a-z]/u;
/**
 * NUL, CR or LF anywhere, or SP/HTAB first or last (RFC 9113 §8.2.1). Three `indexOf` scans and
 * two end checks rather than one regular expression: on a ~1 KB bearer token, in every request,
 * about a quarter of the regular expression's time (~0.2 vs ~0.9 µs here).
 */
function badValue(value: string): boolean {
  const n = value.length;
  if (n === 0) return false;
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(n - 1);
  if (first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09) return true;
  return value.indexOf('\n') >= 0 || value.indexOf('\r') >= 0 || value.indexOf('\0') >= 0;
}

/** RFC 9113 §8.2.2: fields that are connection-specific in HTTP/1.1 and malformed in HTTP/2. */
const CONNECTION_SPECIFIC = new Set(['connection', 'proxy-connection', 'keep-alive', 'transfer-encoding', 'upgrade']);
const REQUEST_PSEUDO = new Set([':method', ':scheme', ':authority', ':path']);

/**
 * Gathers and checks one header block's fields. `add` is HPACK's field callback; afterwards
 * `finish()` says what is wrong (a short reason) or undefined when the block is well-formed.
 */
export class FieldCollector {
  readonly fields: FieldMap = Object.create(null) as FieldMap;
  #problem: string | undefined;
  #regularSeen = false;
  readonly #trailers: boolean;

  /** `trailers`: a trailer section (no pseudo-header field allowed). */
  constructor(trailers: boolean) {
    this.#trailers = trailers;
  }

  readonly add = (name: string, value: string): void => {
    if (this.#problem !== undefined) return;
    if (name.charCodeAt(0) === 0x3a) return this.#pseudo(name, value);
    this.#regularSeen = true;
    if (name.length === 0 || BAD_NAME.test(name)) return this.#fail('invalid field name');
    if (badValue(value)) return this.#fail(`invalid value for ${name}`);
    if (CONNECTION_SPECIFIC.has(name)) return this.#fail(`connection-specific field ${name}`);
    if (name === 'te' && value !== 'trailers') return this.#fail('te other than trailers');
    const had = this.fields[name];
    if (had === undefined) this.fields[name] = value;
    else if (typeof had === 'string') this.fields[name] = [had, value];
    else had.push(value);
  };

  #pseudo(name: string, value: string): void {
    if (this.#trailers) return this.#fail('pseudo-header field in trailers');
    if (this.#regularSeen) return this.#fail('pseudo-header field after a regular field');
    if (!REQUEST_PSEUDO.has(name)) return this.#fail(`unknown pseudo-header field ${name.slice(0, 32)}`);
    if (this.fields[name] !== undefined) return this.#fail(`duplicate ${name}`);
    if (badValue(value)) return this.#fail(`invalid value for ${name}`);
    this.fields[name] = value;
  }

  #fail(reason: string): void {
    this.#problem = reason;
  }

  /** What makes the block malformed, or undefined. */
  finish(): string | undefined {
    if (this.#problem !== undefined || this.#trailers) return this.#problem;
    const f = this.fields;
    const method = f[':method'];
    if (method === undefined || method === '') return 'missing :method';
    if (method === 'CONNECT') {
      if (f[':scheme'] !== undefined || f[':path'] !== undefined || f[':authority'] === undefined) return 'malformed CONNECT request';
      return undefined;
    }
    if (f[':scheme'] === undefined || f[':scheme'] === '') return 'missing :scheme';
    if (f[':path'] === undefined || f[':path'] === '') return 'missing :path';
    const length = f['content-length'];
    if (length !== undefined && (typeof length !== 'string' || !/^[0-9]{1,15}$/u.test(length))) return 'invalid content-length';
    return undefined;
  }

  /** The declared `content-length`, or -1 (checked against the DATA received, §8.1.1). */
  contentLength(): number {
    const v = this.fields['content-length'];
    return typeof v === 'string' ? Number(v) : -1;
  }
}
