/**
 * The API requests the devcluster served, for tests that check how a client talks to it (list
 * pages with `limit`/`continue`, watch parameters): method, path, decoded query, watch or not.
 * Bounded: the oldest entries go first. Request bodies and headers (tokens) are never kept.
 */

export interface LoggedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  readonly watch: boolean;
}

export class RequestLog {
  readonly #capacity: number;
  #entries: LoggedRequest[] = [];

  constructor(capacity = 10_000) {
    this.#capacity = capacity;
  }

  record(r: LoggedRequest): void {
    this.#entries.push(r);
    if (this.#entries.length > this.#capacity) this.#entries = this.#entries.slice(-Math.floor(this.#capacity / 2));
  }

  /** Entries (oldest first) matching every given field; `path` is an exact match. */
  entries(filter: { readonly method?: string; readonly path?: string; readonly watch?: boolean } = {}): LoggedRequest[] {
    return this.#entries.filter(
      (e) =>
        (filter.method === undefined || e.method === filter.method.toUpperCase()) &&
        (filter.path === undefined || e.path === filter.path) &&
        (filter.watch === undefined || e.watch === filter.watch),
    );
  }

  clear(): void {
    this.#entries = [];
  }
}
