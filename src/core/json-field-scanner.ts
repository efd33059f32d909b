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
 * `JsonScanError` with the byte offset.
 */

export class JsonScanError extends Error {
  constructor(message: string, readonly offset: number) {
    super(`${message} at byte ${offset}`);
    this.name = 'JsonScanError';
  }
}

interface PathNode {
  readonly path: string;
  readonly children: Map<string, PathNode>;
  /** The name the value is kept under (the wanted path itself). */
  field: string | undefined;
  record: boolean;
}

function node(path: string): PathNode {
  return { path, children: new Map(), field: undefined, record: false };
}

export interface ScanSpec {
  /** Dotted paths of wanted string values (`*` = any array element). */
  readonly fields: readonly string[];
  /** Dotted paths whose elements are records (`items.*`); field names are then relative to it. */
  readonly records?: readonly string[];
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
  key: string;
}

const Q = 0x22;
const BS = 0x5c;

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

export class JsonFieldScanner {
  readonly #root = node('');
  /** Paths above a wanted field that held an array (`items` when the list had its items array). */
  readonly arrays = new Set<string>();
  readonly #onRecord: (r: ScanRecord) => void;
  /** Wanted fields outside every record. */
  readonly top: ScanRecord = {};
  #state: S = S.Value;
  readonly #stack: Frame[] = [];
  #offset = 0;
  // string state
  #strIsKey = false;
  #strKeep = false;
  #strEsc = false;
  #strBytes: number[] = [];
  #strField: string | undefined;
  /** Node of the value about to start (set by the key / array element that leads to it). */
  #next: PathNode | undefined;
  // skip state
  #skipDepth = 0;
  #skipInStr = false;
  #skipEsc = false;
  #litBytes = 0;

  constructor(spec: ScanSpec, onRecord: (r: ScanRecord) => void = () => undefined) {
    this.#onRecord = onRecord;
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
    for (const f of spec.fields) {
      const rec = records.filter((r) => f.startsWith(`${r}.`)).sort((a, b) => b.length - a.length)[0];
      add(f).field = rec ? f.slice(rec.length + 1) : f;
    }
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
    this.#stack.push({ array, node: n, record, key: '' });
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
  }

  /** Feeds the next bytes of the document. */
  push(chunk: Uint8Array): void {
    const n = chunk.length;
    let i = 0;
    while (i < n) {
      const c = chunk[i]!;
      switch (this.#state) {
        case S.Skip: {
          // The hot loop: bytes of subtrees nobody asked for.
          for (; i < n; i++) {
            const b = chunk[i]!;
            if (this.#skipInStr) {
              if (this.#skipEsc) this.#skipEsc = false;
              else if (b === BS) this.#skipEsc = true;
              else if (b === Q) this.#skipInStr = false;
            } else if (b === Q) this.#skipInStr = true;
            else if (b === 0x7b || b === 0x5b) this.#skipDepth++;
            else if (b === 0x7d || b === 0x5d) {
              if (--this.#skipDepth === 0) {
                i++;
                this.#afterValue();
                break;
              }
            }
          }
          continue;
        }
        case S.Str: {
          if (!this.#strKeep) {
            for (; i < n; i++) {
              const b = chunk[i]!;
              if (this.#strEsc) this.#strEsc = false;
              else if (b === BS) this.#strEsc = true;
              else if (b === Q) break;
            }
            if (i === n) continue;
          } else {
            for (; i < n; i++) {
              const b = chunk[i]!;
              if (this.#strEsc) this.#strEsc = false;
              else if (b === BS) this.#strEsc = true;
              else if (b === Q) break;
              else if (b < 0x20) this.#fail('control character in a string', i);
              this.#strBytes.push(b);
            }
            if (i === n) continue;
          }
          i++; // the closing quote
          this.#endString(i - 1);
          continue;
        }
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
    this.#strBytes = [];
    this.#state = S.Str;
  }

  #endString(at: number): void {
    const text = this.#strKeep ? decodeJsonString(this.#strBytes, () => this.#fail('bad escape in a string', at)) : '';
    this.#strBytes = [];
    if (this.#strIsKey) {
      const f = this.#stack[this.#stack.length - 1]!;
      f.key = text;
      this.#next = f.node?.children.get(text);
      this.#state = S.Colon;
      return;
    }
    if (this.#strField !== undefined) this.#record()[this.#strField] = text;
    this.#afterValue();
  }

  /** The document is complete; throws when it is not (truncated, empty). */
  end(): void {
    if (this.#state === S.Lit && this.#stack.length === 0) this.#state = S.Done;
    if (this.#state !== S.Done) this.#fail('the document ends early', 0);
  }
}

/** The text of a JSON string's raw bytes (between the quotes): UTF-8 with escapes. */
function decodeJsonString(bytes: number[], bad: () => never): string {
  if (!bytes.includes(BS)) return Buffer.from(bytes).toString('utf8');
  let out = '';
  let run: number[] = [];
  const flush = () => {
    if (run.length) out += Buffer.from(run).toString('utf8');
    run = [];
  };
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b !== BS) {
      run.push(b);
      continue;
    }
    flush();
    const e = bytes[++i];
    switch (e) {
      case Q: out += '"'; break;
      case BS: out += '\\'; break;
      case 0x2f: out += '/'; break;
      case 0x62: out += '\b'; break;
      case 0x66: out += '\f'; break;
      case 0x6e: out += '\n'; break;
      case 0x72: out += '\r'; break;
      case 0x74: out += '\t'; break;
      case 0x75: {
        const hex = String.fromCharCode(...bytes.slice(i + 1, i + 5));
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) bad();
        out += String.fromCharCode(parseInt(hex, 16));
        i += 4;
        break;
      }
      default:
        bad();
    }
  }
  flush();
  return out;
}
