/**
 * A UUID as four 32-bit words (16 bytes, big-endian) and back: how the compact pod index keeps
 * pod UIDs. Only the lowercase canonical form (`8-4-4-4-12` hex digits, as the API server makes
 * UIDs) is packed, so the text read back is exactly the text stored.
 */

/** Hex digit value of a char code (lowercase only), or -1. */
function nibble(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

/** Writes `uid` into `out[at..at+4)` and returns true when it is a lowercase canonical UUID (false: nothing written that matters). */
export function parseUuid(uid: string, out: Uint32Array, at: number): boolean {
  if (uid.length !== 36) return false;
  let word = 0;
  let digits = 0;
  for (let i = 0; i < 36; i++) {
    const c = uid.charCodeAt(i);
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 0x2d) return false;
      continue;
    }
    const v = nibble(c);
    if (v < 0) return false;
    word = (word << 4) | v;
    if (++digits % 8 === 0) {
      out[at + digits / 8 - 1] = word >>> 0;
      word = 0;
    }
  }
  return true;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

function hex8(w: number): string {
  return HEX[w >>> 24]! + HEX[(w >>> 16) & 255]! + HEX[(w >>> 8) & 255]! + HEX[w & 255]!;
}

/** The canonical text of the UUID in `words[at..at+4)`. */
export function uuidText(words: Uint32Array, at: number): string {
  const b = hex8(words[at + 1]!);
  const c = hex8(words[at + 2]!);
  return `${hex8(words[at]!)}-${b.slice(0, 4)}-${b.slice(4)}-${c.slice(0, 4)}-${c.slice(4)}${hex8(words[at + 3]!)}`;
}
