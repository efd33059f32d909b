/**
 * A streaming JSON scanner that keeps only the string fields it is asked for. Bytes are pushed
 * in chunks of any size (a boundary may fall anywhere: inside a string, an escape, a multi-byte
 * UTF-8 character); nothing of the document is kept except the wanted strings, so a 400 MB
 * list never becomes one string or one object graph.
 *
 * What is wanted is a set of paths, `*` standing for any array element, e.g.
 * `items.*.metadata.name`. Paths may mark an element as a record (`items.*`): the wanted
 * fields under it are collected per element and handed to `onRecord` when the element closes;
 * wanted fields outside every record land in `top`; an element that is not an object is no record. Subtrees no path reaches are skipped at
 * byte speed (only string quoting and nesting are followed). The document's structure (tokens,
 * nesting, one top-level value) is checked, and the escapes of the strings it keeps; a malformed or truncated document throws
 * `JsonScanError` (ERR_JSON_MALFORMED, status invalid-argument: the document is bad) with the byte
 * offset. An adapter reading someone else's answer wraps it in its own error (the pod list reader:
 * ERR_KUBE_RESPONSE_INVALID, unavailable), so a caller is never told its request was invalid.
 */

import { CertbrokerError } from './errors.js';
import { childAt, indexKeys, node, type PathNode } from './json-scan-paths.js';
import { decodeJsonString } from './json-string.js';

export class JsonScanError extends CertbrokerError<'ERR_JSON_MALFORMED'> {
  /** Where in the document (bytes from its start) it went wrong. */
  readonly offset: number;

  constructor(message: string, offset: number) {
    super('ERR_JSON_MALFORMED', `${message} at byte ${offset}`, { status: 'invalid-argument' });
    this.offset = offset;
  }
}

export interface ScanSpec {
  /** Dotted paths of wanted string values (`*` = any array element). */
  readonly fields: readonly string[];
  /** Dotted paths whose elements are records (`items.*`); field names are then relative to it. */
  readonly records?: readonly string[];
  /** Dotted paths of containers whose end `onClose` is told about (`metadata`: a list's continue token is known then). */
  readonly closes?: readonly string[];
}

export type ScanRecord = Record<string, string>;

const enum S {
  Value, // a value may start (after `:`, `[`, `,` in an array, or at the top)
  KeyOrEnd, // in an object, after `{`
  Key, // in an object, after `,`
  Colon,
  ObjNext, // `,` or `}`
  ArrFirst, // after `[`: a value or `]`
  ArrNext, // `,` or `]`
  Str, // inside a string
  Lit, // inside a number / true / false / null
  Skip, // inside a skipped container
  Done, // after the top-level value
}

interface Frame {
  readonly array: boolean;
  readonly node: PathNode | undefined;
  readonly record: ScanRecord | undefined;
}

const Q = 0x22;
const BS = 0x5c;
/** Bytes that mean nothing outside a string in a skipped subtree (all but `"`, `{`, `[`, `}`, `]`). */
const PLAIN = new Uint8Array(256).fill(1);
for (const c of [Q, 0x7b, 0x5b, 0x7d, 0x5d]) PLAIN[c] = 0;

/**
 * From `from` inside a string body (`esc`: the byte there is escaped): where its closing quote is,
 * or, when the chunk ends first, `n` (the chunk's length) or `n + 1` (it ended on a backslash).
 */
function closingQuote(chunk: Uint8Array, from: number, esc: boolean): number {
  const n = chunk.length;
  let i = from;
  while (i < n) {
    if (esc) {
      esc = false;
      i++;
      continue;
    }
    let b = 0;
    while (i < n && (b = chunk[i]!) !== Q && b !== BS) i++;
    if (i === n) break;
    if (b === Q) return i;
    esc = true;
    i++;
  }
  return esc ? n + 1 : n;
}

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

export class JsonFieldScanner {
  readonly #root = node('');
  /** Paths above a wanted field that held an array (`items` when the list had its items array). */
  readonly arrays = new Set<string>();
  readonly #onRecord: (r: ScanRecord) => void;
  readonly #onClose: (path: string) => void;
  /** Wanted fields outside every record. */
  readonly top: ScanRecord = {};
  #state: S = S.Value;
  readonly #stack: Frame[] = [];
  #offset = 0;
  // string state
  #strIsKey = false;
  #strKeep = false;
  #strEsc = false;
  /** Pieces of a kept string from earlier chunks. */
  #strParts: Uint8Array[] = [];
  #strField: string | undefined;
  /** Node of the value about to start (set by the key / array element that leads to it). */
  #next: PathNode | undefined;
  // skip state
  #skipDepth = 0;
  #skipInStr = false;
  #skipEsc = false;
  #litBytes = 0;

  constructor(spec: ScanSpec, onRecord: (r: ScanRecord) => void = () => undefined, onClose: (path: string) => void = () => undefined) {
    this.#onRecord = onRecord;
    this.#onClose = onClose;
    const add = (path: string): PathNode => {
      let n = this.#root;
      for (const part of path.split('.')) {
        let c = n.children.get(part);
        if (!c) n.children.set(part, (c = node(n.path === '' ? part : `${n.path}.${part}`)));
        n = c;
      }
      return n;
    };
    const records = spec.records ?? [];
    for (const r of records) add(r).record = true;
    for (const c of spec.closes ?? []) add(c).notify = true;
    for (const f of spec.fields) {
      const rec = records.filter((r) => f.startsWith(`${r}.`)).sort((a, b) => b.length - a.length)[0];
      add(f).field = rec ? f.slice(rec.length + 1) : f;
    }
    indexKeys(this.#root);
    this.#next = this.#root;
  }

  #fail(msg: string, at: number): never {
    throw new JsonScanError(msg, this.#offset + at);
  }

  #record(): ScanRecord {
    for (let i = this.#stack.length - 1; i >= 0; i--) {
      const r = this.#stack[i]!.record;
      if (r) return r;
    }
    return this.top;
  }

  /** After a complete value: what the enclosing container expects next. */
  #afterValue(): void {
    const f = this.#stack[this.#stack.length - 1];
    this.#state = f === undefined ? S.Done : f.array ? S.ArrNext : S.ObjNext;
  }

  #open(array: boolean, n: PathNode | undefined): void {
    const record = n?.record && !array ? ({} as ScanRecord) : undefined;
    this.#stack.push({ array, node: n, record });
    if (array) {
      if (n) this.arrays.add(n.path);
      this.#next = n?.children.get('*');
      this.#state = S.ArrFirst;
    } else this.#state = S.KeyOrEnd;
  }

  #close(at: number): void {
    const f = this.#stack.pop();
    if (f === undefined) this.#fail('unbalanced close', at);
    if (f.record) this.#onRecord(f.record);
    this.#afterValue();
    if (f.node?.notify) this.#onClose(f.node.path);
  }

  /** Feeds the next bytes of the document. */
  push(chunk: Uint8Array): void {
    const n = chunk.length;
    let i = 0;
    while (i < n) {
      const c = chunk[i]!;
      switch (this.#state) {
        case S.Skip:
          i = this.#skip(chunk, i);
          continue;
        case S.Str:
          i = this.#string(chunk, i);
          continue;
        case S.Lit: {
          if (c === 0x2c || c === 0x7d || c === 0x5d || isWs(c)) {
            this.#afterValue();
            continue; // the delimiter is read in the next state
          }
          if (!((c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || (c >= 0x61 && c <= 0x7a) || c === 0x45)) this.#fail('bad literal', i);
          this.#litBytes++;
          i++;
          continue;
        }
        default:
          break;
      }
      i++;
      if (!isWs(c)) this.#structural(c, i - 1);
    }
    this.#offset += n;
  }

  /** The hot loop: bytes of a subtree nobody asked for, from `i`; returns where it stopped (the chunk's end, or after the subtree). */
  #skip(chunk: Uint8Array, from: number): number {
    const n = chunk.length;
    let inStr = this.#skipInStr;
    let esc = this.#skipEsc;
    let depth = this.#skipDepth;
    let i = from;
    while (i < n) {
      if (inStr) {
        const q = closingQuote(chunk, i, esc);
        esc = q > n;
        if (q >= n) {
          i = n;
          break;
        }
        inStr = false;
        i = q + 1;
        continue;
      }
      let c = 0;
      while (i < n && PLAIN[(c = chunk[i]!)] === 1) i++;
      if (i === n) break;
      i++;
      if (c === Q) inStr = true;
      else if (c === 0x7b || c === 0x5b) depth++;
      else if (--depth === 0) {
        this.#afterValue();
        break;
      }
    }
    this.#skipInStr = inStr;
    this.#skipEsc = esc;
    this.#skipDepth = depth;
    return i;
  }

  /**
   * Inside a string, from `i`: returns where it stopped (the chunk's end, or after the closing
   * quote). A kept string is decoded from the chunk itself when it ends there; a piece before a
   * chunk boundary is copied (the caller may reuse its buffer).
   */
  #string(chunk: Uint8Array, from: number): number {
    const n = chunk.length;
    let esc = this.#strEsc;
    let i = from;
    /** Bytes OR-ed (>= 0x80: not ASCII) and whether a backslash was seen, in this chunk's piece. */
    let bits = 0;
    let escaped = false;
    if (!this.#strKeep) {
      const q = closingQuote(chunk, i, esc);
      esc = q > n;
      i = Math.min(q, n);
    } else {
      while (i < n) {
        if (esc) {
          esc = false;
          i++;
          continue;
        }
        let b = 0;
        while (i < n && (b = chunk[i]!) !== Q && b !== BS && b >= 0x20) {
          bits |= b;
          i++;
        }
        if (i === n || b === Q) break;
        if (b !== BS) this.#fail('control character in a string', i);
        esc = escaped = true;
        i++;
      }
    }
    this.#strEsc = esc;
    if (i === n) {
      if (this.#strKeep) this.#strParts.push(new Uint8Array(chunk.subarray(from, n)));
      return n;
    }
    if (!this.#strKeep) this.#endString('');
    else if (this.#strParts.length > 0 || escaped) {
      const bytes = Buffer.concat([...this.#strParts, chunk.subarray(from, i)]);
      this.#strParts = [];
      this.#endString(decodeJsonString(bytes, () => this.#fail('bad escape in a string', i)));
    } else if (this.#strIsKey) {
      this.#endKey(childAt(this.#stack[this.#stack.length - 1]!.node!, chunk, from, i));
    } else {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
      this.#endString(buf.toString(bits < 0x80 ? 'latin1' : 'utf8', from, i));
    }
    return i + 1; // after the closing quote
  }

  /** A byte outside strings, literals and skipped subtrees (not whitespace), at offset `at` of the chunk. */
  #structural(c: number, at: number): void {
    switch (this.#state) {
      case S.Value:
      case S.ArrFirst: {
        if (this.#state === S.ArrFirst && c === 0x5d) {
          this.#close(at);
          break;
        }
        const target = this.#next;
        if (c === Q) {
          this.#startString(false, target?.field);
        } else if (c === 0x7b || c === 0x5b) {
          if (target === undefined || target.children.size === 0) {
            this.#skipDepth = 1;
            this.#skipInStr = false;
            this.#skipEsc = false;
            this.#state = S.Skip;
          } else this.#open(c === 0x5b, target);
        } else if ((c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x74 || c === 0x66 || c === 0x6e) {
          this.#litBytes = 1;
          this.#state = S.Lit;
        } else this.#fail(`unexpected ${JSON.stringify(String.fromCharCode(c))}`, at);
        break;
      }
      case S.KeyOrEnd:
      case S.Key:
        if (c === Q) this.#startString(true, undefined);
        else if (c === 0x7d && this.#state === S.KeyOrEnd) this.#close(at);
        else this.#fail('expected a key', at);
        break;
      case S.Colon:
        if (c !== 0x3a) this.#fail("expected ':'", at);
        this.#state = S.Value;
        break;
      case S.ObjNext:
        if (c === 0x2c) this.#state = S.Key;
        else if (c === 0x7d) this.#close(at);
        else this.#fail("expected ',' or '}'", at);
        break;
      case S.ArrNext: {
        const f = this.#stack[this.#stack.length - 1]!;
        if (c === 0x2c) {
          this.#next = f.node?.children.get('*');
          this.#state = S.Value;
        } else if (c === 0x5d) this.#close(at);
        else this.#fail("expected ',' or ']'", at);
        break;
      }
      case S.Done:
        this.#fail('data after the document', at);
        break;
      default:
        break;
    }
  }

  #startString(isKey: boolean, field: string | undefined): void {
    this.#strIsKey = isKey;
    // Keys are kept only when the object has wanted children (they choose the path).
    this.#strKeep = isKey ? this.#stack[this.#stack.length - 1]!.node !== undefined : field !== undefined;
    this.#strField = field;
    this.#strEsc = false;
    this.#strParts = [];
    this.#state = S.Str;
  }

  /** A string ended at `at`: `text` when it was kept ('' otherwise). */
  #endString(text: string): void {
    if (this.#strIsKey) {
      this.#endKey(text === '*' ? undefined : this.#stack[this.#stack.length - 1]!.node?.children.get(text));
      return;
    }
    if (this.#strField !== undefined) this.#record()[this.#strField] = text;
    this.#afterValue();
  }

  /** A key ended: `child` is the path node it leads to (undefined: a subtree nobody asked for). */
  #endKey(child: PathNode | undefined): void {
    this.#next = child;
    this.#state = S.Colon;
  }

  /** The document is complete; throws when it is not (truncated, empty). */
  end(): void {
    if (this.#state === S.Lit && this.#stack.length === 0) this.#state = S.Done;
    if (this.#state !== S.Done) this.#fail('the document ends early', 0);
  }
}
