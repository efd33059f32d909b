/**
 * Configuration building blocks. Each component declares its settings as named constants,
 * reads them from flags/env through a `ConfigReader`, and calls `done()` which throws one
 * `ConfigError` listing every problem at once (name and offending value), or returns nothing.
 * The result is frozen by the caller.
 */
import { CertbrokerError } from './errors.js';
import { parseLogLevel, type LogLevel } from './log.js';

export class ConfigError extends CertbrokerError<'ERR_CONFIG_INVALID'> {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super('ERR_CONFIG_INVALID', `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      status: 'invalid-argument',
    });
    this.problems = problems;
  }
}

type Source = Readonly<Record<string, string | undefined>>;

export class ConfigReader {
  readonly #env: Source;
  readonly #problems: string[] = [];

  constructor(env: Source = process.env) {
    this.#env = env;
  }

  problem(message: string): void {
    this.#problems.push(message);
  }

  /** The raw value: an explicit (flag) value wins over the env var. */
  raw(name: string, explicit?: string): string | undefined {
    if (explicit !== undefined) return explicit;
    const v = this.#env[name];
    return v === undefined || v === '' ? undefined : v;
  }

  string(name: string, fallback: string, explicit?: string): string {
    return this.raw(name, explicit) ?? fallback;
  }

  /** A log level (debug|info|warn|error|silent); a bad one is a problem listed with the others. */
  logLevel(name: string, explicit?: string): LogLevel {
    try {
      return parseLogLevel(this.raw(name, explicit));
    } catch (err) {
      this.problem(`${name}: ${(err as Error).message}`);
      return 'info';
    }
  }

  optionalString(name: string, explicit?: string): string | undefined {
    return this.raw(name, explicit);
  }

  required(name: string, explicit?: string): string {
    const v = this.raw(name, explicit);
    if (v === undefined) {
      this.problem(`${name} is required`);
      return '';
    }
    return v;
  }

  int(name: string, fallback: number, opts: { min?: number; max?: number; explicit?: string } = {}): number {
    const raw = this.raw(name, opts.explicit);
    if (raw === undefined) return fallback;
    if (!/^-?\d+$/.test(raw.trim())) {
      this.problem(`${name}=${JSON.stringify(raw)} is not an integer`);
      return fallback;
    }
    const n = Number(raw);
    if (opts.min !== undefined && n < opts.min) this.problem(`${name}=${raw} is below the minimum ${opts.min}`);
    if (opts.max !== undefined && n > opts.max) this.problem(`${name}=${raw} is above the maximum ${opts.max}`);
    return n;
  }

  bool(name: string, fallback: boolean, explicit?: string): boolean {
    const raw = this.raw(name, explicit);
    if (raw === undefined) return fallback;
    const v = raw.trim().toLowerCase();
    if (v === 'true' || v === '1' || v === 'yes' || v === 'on') return true;
    if (v === 'false' || v === '0' || v === 'no' || v === 'off') return false;
    this.problem(`${name}=${JSON.stringify(raw)} is not a boolean (true|false)`);
    return fallback;
  }

  list(name: string, fallback: readonly string[], explicit?: string): string[] {
    const raw = this.raw(name, explicit);
    if (raw === undefined) return [...fallback];
    return raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  }

  /** A list of `namespace/serviceaccount` entries; each other entry is a problem. */
  accountList(name: string, fallback: readonly string[], explicit?: string): string[] {
    const accounts = this.list(name, fallback, explicit);
    for (const a of accounts) if (!/^[a-z0-9-]+\/[a-z0-9.-]+$/.test(a)) this.problem(`${name} entry ${JSON.stringify(a)} is not namespace/serviceaccount`);
    return accounts;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T, explicit?: string): T {
    const raw = this.raw(name, explicit);
    if (raw === undefined) return fallback;
    if ((allowed as readonly string[]).includes(raw)) return raw as T;
    this.problem(`${name}=${JSON.stringify(raw)} is not one of ${allowed.join('|')}`);
    return fallback;
  }

  /** Throws a ConfigError listing every problem, if any. */
  done(): void {
    if (this.#problems.length > 0) throw new ConfigError(this.#problems);
  }
}
