/** What each of the local stack's sample clients holds per pod or identity (the live view's rows). */

/** What a sample client holds for one identity, and when it last changed. */
export interface SampleView {
  serial: string;
  notAfter: number;
  messages: number;
  /** When the serial last changed after the first one (ms since epoch). */
  lastRotationAt: number | undefined;
  /** Why the stream ended or the last fetch failed. */
  problem: string | undefined;
}

export function emptyView(): SampleView {
  return { serial: '', notAfter: 0, messages: 0, lastRotationAt: undefined, problem: undefined };
}

/** Records a certificate received at `now`. */
export function received(view: SampleView, serial: string, notAfter: number, now: number): void {
  if (view.serial !== '' && view.serial !== serial) view.lastRotationAt = now;
  view.serial = serial;
  view.notAfter = notAfter;
  view.messages++;
  view.problem = undefined;
}
