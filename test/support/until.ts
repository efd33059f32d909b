export interface UntilOptions {
  /** How long to keep polling, roughly (default 10 s): counted in polls, so a loaded machine waits longer, never less. */
  readonly timeoutMs?: number;
  /** The pause between two reads of the condition (default 5 ms). */
  readonly pollMs?: number;
}

/**
 * Resolves once `pred` holds (it may be read asynchronously: a metrics scrape, a file), polling
 * every `pollMs`; fails naming `what` after about `timeoutMs` (a wait, never a timing assertion).
 * Tests and the benchmarks' set-up both wait with it.
 */
export async function until(pred: () => boolean | Promise<boolean>, what: string, options: UntilOptions = {}): Promise<void> {
  const pollMs = options.pollMs ?? 5;
  const polls = Math.max(1, Math.ceil((options.timeoutMs ?? 10_000) / pollMs));
  for (let i = 0; i < polls; i++) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  throw new Error(`timed out waiting for ${what}`);
}
