/** Polls `probe` (every `pollMs`) until it holds; throws naming `what` after `timeoutMs`. For bench set-up only. */
export async function waitFor(what: string, probe: () => boolean, timeoutMs: number, pollMs = 5): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
