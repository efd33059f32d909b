import { errCode } from '../../../src/core/errors.js';

/** The `code` of what a call throws (undefined when it returns): tests compare error codes, not messages. */
export function thrownCode(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return errCode(err);
  }
}

/** The `code` a promise rejects with (undefined when it resolves). */
export async function rejectionCode(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return errCode(err);
  }
}
