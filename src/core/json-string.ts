/** JSON string bodies as raw bytes (between the quotes) decoded to text, for the streaming field scanner. */

const Q = 0x22;
const BS = 0x5c;

/** The text of a JSON string's raw bytes (between the quotes): UTF-8 with escapes. */
export function decodeJsonString(raw: Uint8Array, bad: () => never): string {
  const bytes = Buffer.isBuffer(raw) ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.length);
  if (!bytes.includes(BS)) return bytes.toString('utf8');
  let out = '';
  let run = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b !== BS) continue;
    out += bytes.toString('utf8', run, i);
    const e = bytes[++i];
    run = i + 1;
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
        const hex = bytes.toString('latin1', i + 1, i + 5);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) bad();
        out += String.fromCharCode(parseInt(hex, 16));
        i += 4;
        run = i + 1;
        break;
      }
      default:
        bad();
    }
  }
  return out + bytes.toString('utf8', run, bytes.length);
}
