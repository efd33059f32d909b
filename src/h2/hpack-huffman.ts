/**
 * The HPACK Huffman code (RFC 7541 5.2) for strings: a byte-at-a-time decoder and an encoder.
 *
 * Decoding walks a state machine rather than the tree bit by bit: a state is an internal node of
 * the code tree (257 leaves, so 256 nodes, node 0 the root), and one table lookup per input byte
 * gives the next state and the 0, 1 or 2 symbols completed on the way (the shortest code is 5 bits,
 * so at most two end inside one byte). Reaching EOS inside a string is an error, and a string may
 * only end at the root or at a node reached from the root by at most 7 one-bits (the padding).
 * The 64 Ki-entry table (256 KiB) is built on first use, in about a millisecond.
 */
import { HUFFMAN_CODE_LENGTHS, HUFFMAN_CODES, HUFFMAN_EOS } from './hpack-tables.js';

/** Why a Huffman string was refused. */
export type HuffmanFault = 'eos' | 'padding';

const STATE_MASK = 0xff;
const COUNT_SHIFT = 24;
const FAIL = 1 << 27;

interface DecodeMachine {
  /** Entry `(state << 8) | byte`: next state, first symbol << 8, second << 16, count << 24, FAIL. */
  readonly steps: Uint32Array;
  /** 1 where a string may end: the root, or all one-bits from it and at most 7 deep. */
  readonly accepting: Uint8Array;
}

let machine: DecodeMachine | undefined;

/** The code tree: `child[2 * node + bit]` is an internal node (>= 0) or a leaf, `-1 - symbol`. */
function codeTree(): Int32Array {
  const child = new Int32Array(512).fill(0);
  let nodes = 1;
  for (let sym = 0; sym <= HUFFMAN_EOS; sym++) {
    const len = HUFFMAN_CODE_LENGTHS[sym]!;
    const code = HUFFMAN_CODES[sym]!;
    let node = 0;
    for (let i = len - 1; i > 0; i--) {
      const slot = 2 * node + (Math.floor(code / 2 ** i) & 1);
      if (child[slot] === 0) child[slot] = nodes++;
      node = child[slot]!;
    }
    child[2 * node + (code & 1)] = -1 - sym;
  }
  return child;
}

function buildMachine(): DecodeMachine {
  const child = codeTree();
  const accepting = new Uint8Array(256);
  // Follow one-bits from the root: the nodes at depth 0..7 on that path may end a string.
  for (let node = 0, depth = 0; depth <= 7 && node >= 0; depth++, node = child[2 * node + 1]!) accepting[node] = 1;
  const steps = new Uint32Array(256 * 256);
  for (let state = 0; state < 256; state++) {
    for (let byte = 0; byte < 256; byte++) {
      let node = state;
      let entry = 0;
      let count = 0;
      for (let bit = 7; bit >= 0; bit--) {
        const next = child[2 * node + ((byte >> bit) & 1)]!;
        if (next >= 0) {
          node = next;
          continue;
        }
        const sym = -1 - next;
        if (sym === HUFFMAN_EOS) entry |= FAIL;
        else entry |= sym << (8 + 8 * count++);
        node = 0;
      }
      steps[(state << 8) | byte] = (entry | (count << COUNT_SHIFT) | node) >>> 0;
    }
  }
  return { steps, accepting };
}

let scratch = Buffer.allocUnsafe(1024);

/**
 * The latin1 string that `src[start..end)` Huffman-decodes to, or the fault that makes it invalid.
 * Work is one table lookup per byte.
 */
export function huffmanDecode(src: Uint8Array, start: number, end: number): string | HuffmanFault {
  const m = (machine ??= buildMachine());
  const steps = m.steps;
  // 8 bits decode to at most 8 / 5 symbols.
  const need = Math.ceil(((end - start) * 8) / 5) + 2;
  if (scratch.length < need) scratch = Buffer.allocUnsafe(Math.max(need, scratch.length * 2));
  const out = scratch;
  let n = 0;
  let state = 0;
  for (let i = start; i < end; i++) {
    const e = steps[(state << 8) | src[i]!]!;
    if ((e & FAIL) !== 0) return 'eos';
    // Both symbol slots are written every time (no branches); `count` says how many were real.
    out[n] = (e >>> 8) & 0xff;
    out[n + 1] = (e >>> 16) & 0xff;
    n += e >>> COUNT_SHIFT;
    state = e & STATE_MASK;
  }
  if (m.accepting[state] !== 1) return 'padding';
  return out.toString('latin1', 0, n);
}

/** The Huffman-coded length in bytes of latin1 `s`, or -1 when `s` has a character above U+00FF. */
export function huffmanLength(s: string): number {
  let bits = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff) return -1;
    bits += HUFFMAN_CODE_LENGTHS[c]!;
  }
  return Math.ceil(bits / 8);
}

/** Writes latin1 `s` Huffman-coded at `out[pos..]` (padded with one-bits); returns the end. */
export function huffmanEncodeInto(s: string, out: Uint8Array, pos: number): number {
  // acc holds fewer than 8 pending bits before each code is appended: at most 37 bits, exact in a double.
  let acc = 0;
  let bits = 0;
  let p = pos;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const len = HUFFMAN_CODE_LENGTHS[c]!;
    acc = acc * 2 ** len + HUFFMAN_CODES[c]!;
    bits += len;
    while (bits >= 8) {
      bits -= 8;
      const scale = 2 ** bits;
      const byte = Math.floor(acc / scale);
      out[p++] = byte;
      acc -= byte * scale;
    }
  }
  if (bits > 0) out[p++] = (acc << (8 - bits)) | (0xff >> bits);
  return p;
}
