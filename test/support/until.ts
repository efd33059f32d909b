/** Resolves once `pred` holds, polling every 5 ms; fails after ~10 s (a wait, never a timing assertion). */
export async function until(pred: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (pred()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** `until` for a condition that must be read asynchronously (a metrics scrape, a file): polls every 20 ms, fails after ~10 s. */
export async function untilAsync(pred: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}
