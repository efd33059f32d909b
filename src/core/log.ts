/**
 * Structured logs: one JSON object per line on stderr (stdout belongs to protocols such as
 * CNI). Fields whose names look secret (token, password, secret, authorization, jwt, bearer,
 * private key, in snake, kebab or camel case: `token`, `bearer_token`, `accessToken`,
 * `privateKey`; csr bodies are fine) are replaced by `[redacted]` before anything is written,
 * in addition to `Secret` values redacting themselves. As a second line of defence, text that
 * looks like a JWT or a PEM private key is cut out of every string written (error messages from
 * libraries included).
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export type LogFields = Readonly<Record<string, unknown>>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
  readonly level: LogLevel;
}

export interface LoggerOptions {
  readonly level?: LogLevel;
  readonly fields?: LogFields;
  /** Where lines go; default process.stderr. Tests capture lines here. */
  readonly sink?: (line: string) => void;
  readonly now?: () => number;
}

/** A field is secret when its last word is one of these ... */
const SECRET_LAST_WORDS: ReadonlySet<string> = new Set([
  'token', 'tokens', 'password', 'passwd', 'secret', 'secrets', 'authorization', 'jwt', 'bearer', 'credential', 'credentials',
  'privatekey', 'keypem',
]);
/** ... or its last two words are one of these. */
const SECRET_LAST_PAIRS: ReadonlySet<string> = new Set(['private key', 'key pem']);

/** `bearer_token`, `x-auth-token`, `accessToken`, `privateKEY` -> lower-case words. */
function fieldWords(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== '');
}

/** Verdicts for field names already seen: every log line repeats the same few names. */
const secretFieldVerdicts = new Map<string, boolean>();
/** Names past this many are judged each time (field names from arbitrary objects are unbounded). */
const MAX_CACHED_FIELD_NAMES = 1024;

export function isSecretFieldName(name: string): boolean {
  const cached = secretFieldVerdicts.get(name);
  if (cached !== undefined) return cached;
  const words = fieldWords(name);
  const last = words.at(-1);
  const secret = last !== undefined && (SECRET_LAST_WORDS.has(last) || SECRET_LAST_PAIRS.has(words.slice(-2).join(' ')));
  if (secretFieldVerdicts.size < MAX_CACHED_FIELD_NAMES) secretFieldVerdicts.set(name, secret);
  return secret;
}

/** A compact JWS (JWT): base64url header starting `{"` (eyJ), payload, signature. */
const JWT_TEXT = /eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g;
/** A PEM private key block (PKCS#8, SEC1, PKCS#1, encrypted), complete or cut off. */
const PEM_KEY_TEXT = /-----BEGIN ([A-Z ]*)PRIVATE KEY-----[\s\S]*?(-----END \1PRIVATE KEY-----|$)/g;

/** `text` with anything that looks like a JWT or a PEM private key replaced by `[redacted]`. */
export function redactSecretText(text: string): string {
  if (!text.includes('eyJ') && !text.includes('PRIVATE KEY')) return text;
  return text.replace(JWT_TEXT, '[redacted]').replace(PEM_KEY_TEXT, '[redacted]');
}

function sanitize(value: unknown, depth: number): unknown {
  if (value === null || value === undefined) return value;
  if (typeof value === 'string') return redactSecretText(value);
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Error) {
    const out: Record<string, unknown> = { message: redactSecretText(value.message), name: value.name };
    const code = (value as { code?: unknown }).code;
    if (typeof code === 'string' || typeof code === 'number') out.code = code;
    return out;
  }
  if (typeof value !== 'object') return value;
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return sanitize((value as { toJSON(): unknown }).toJSON(), depth);
  }
  if (depth > 6) return '[depth]';
  if (Array.isArray(value)) return value.map((v) => sanitize(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = isSecretFieldName(k) ? '[redacted]' : sanitize(v, depth + 1);
  }
  return out;
}

export function parseLogLevel(raw: string | undefined, fallback: LogLevel = 'info'): LogLevel {
  if (raw === undefined || raw === '') return fallback;
  const v = raw.toLowerCase();
  if (v === 'debug' || v === 'info' || v === 'warn' || v === 'error' || v === 'silent') return v;
  throw new Error(`unknown log level ${JSON.stringify(raw)} (want debug|info|warn|error|silent)`);
}

/** The level `raw` names, or `fallback` when it names none (the config reader lists that problem). */
export function logLevelOr(raw: string | undefined, fallback: LogLevel): LogLevel {
  try {
    return parseLogLevel(raw, fallback);
  } catch {
    return fallback;
  }
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? 'info';
  const base = options.fields ?? {};
  const sink = options.sink ?? ((line: string) => process.stderr.write(line + '\n'));
  const now = options.now ?? Date.now;
  const emit = (lvl: Exclude<LogLevel, 'silent'>, msg: string, fields?: LogFields) => {
    if (ORDER[lvl] < ORDER[level]) return;
    const record = sanitize({ time: new Date(now()).toISOString(), level: lvl, msg, ...base, ...fields }, 0);
    sink(JSON.stringify(record));
  };
  return {
    level,
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger({ level, fields: { ...base, ...fields }, sink, now }),
  };
}

/** A logger that drops everything (tests that do not look at logs). */
export const silentLogger: Logger = createLogger({ level: 'silent' });
