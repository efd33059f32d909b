/**
 * Polls `probe` until it yields a value (neither undefined nor false), every 25 ms, at most
 * `tries` times; a wait for state, never a timing assertion.
 */
export async function eventually<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, tries = 400): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}
