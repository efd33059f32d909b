/**
 * The string literals of a TypeScript source (quoted strings and the literal parts of template
 * strings), without comments: for tests that check where a wire constant is written. A small
 * lexer: comments, strings, templates (with nested `${...}`), and regular expression literals
 * (told from division by the token before them, as JavaScript's grammar does in practice).
 */

export interface StringLiteral {
  readonly value: string;
  /** 1-based line of the literal's start. */
  readonly line: number;
}

const REGEX_AFTER_KEYWORD = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw', 'case', 'do', 'else', 'yield', 'await']);

export function stringLiterals(source: string): StringLiteral[] {
  const out: StringLiteral[] = [];
  let i = 0;
  let line = 1;
  // The last significant token: decides whether a '/' starts a regex.
  let prev = '';
  // Brace depth at which each open template's `${` started.
  const templates: number[] = [];
  let depth = 0;

  const readQuoted = (quote: string): string => {
    let value = '';
    i++;
    while (i < source.length && source[i] !== quote) {
      if (source[i] === '\\') {
        value += source.slice(i, i + 2);
        i += 2;
        continue;
      }
      if (source[i] === '\n') line++;
      value += source[i++];
    }
    i++;
    return value;
  };

  /** Reads template text from i up to the end of the template or a `${`; returns whether it ended. */
  const readTemplatePart = (): boolean => {
    const start = line;
    let value = '';
    while (i < source.length) {
      const c = source[i]!;
      if (c === '\\') {
        value += source.slice(i, i + 2);
        i += 2;
        continue;
      }
      if (c === '`') {
        i++;
        out.push({ value, line: start });
        return true;
      }
      if (c === '$' && source[i + 1] === '{') {
        i += 2;
        out.push({ value, line: start });
        return false;
      }
      if (c === '\n') line++;
      value += c;
      i++;
    }
    return true;
  };

  while (i < source.length) {
    const c = source[i]!;
    const next = source[i + 1];
    if (c === '\n') {
      line++;
      i++;
    } else if (/\s/u.test(c)) {
      i++;
    } else if (c === '/' && next === '/') {
      while (i < source.length && source[i] !== '\n') i++;
    } else if (c === '/' && next === '*') {
      const end = source.indexOf('*/', i + 2);
      const stop = end === -1 ? source.length : end + 2;
      for (let k = i; k < stop; k++) if (source[k] === '\n') line++;
      i = stop;
    } else if (c === "'" || c === '"') {
      const start = line;
      out.push({ value: readQuoted(c), line: start });
      prev = 'literal';
    } else if (c === '`') {
      i++;
      if (!readTemplatePart()) templates.push(depth);
      prev = 'literal';
    } else if (c === '/' && (prev === '' || /^[([{,;:=!&|?+\-*%<>~^]$/u.test(prev) || REGEX_AFTER_KEYWORD.has(prev))) {
      // A regular expression literal: skip it (character classes may hold '/').
      i++;
      let inClass = false;
      while (i < source.length && (inClass || source[i] !== '/')) {
        if (source[i] === '\\') i++;
        else if (source[i] === '[') inClass = true;
        else if (source[i] === ']') inClass = false;
        i++;
      }
      i++;
      while (i < source.length && /[a-z]/u.test(source[i]!)) i++;
      prev = 'literal';
    } else if (/[A-Za-z_$0-9]/u.test(c)) {
      let word = '';
      while (i < source.length && /[A-Za-z_$0-9]/u.test(source[i]!)) word += source[i++];
      prev = word;
    } else {
      i++;
      if (c === '{') depth++;
      if (c === '}') {
        if (templates.length > 0 && templates.at(-1) === depth) {
          templates.pop();
          if (!readTemplatePart()) templates.push(depth);
          prev = 'literal';
          continue;
        }
        depth--;
      }
      prev = c;
    }
  }
  return out;
}
