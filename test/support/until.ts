/** Resolves once `pred` holds (it may be read asynchronously: a metrics scrape, a file), polling every 5 ms; fails after ~10 s (a wait, never a timing assertion). */
export async function until(pred: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}
