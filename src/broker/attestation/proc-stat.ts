/**
 * The two facts of `/proc` that tell one process from another with the same PID: its state and
 * start time (`/proc/<pid>/stat` fields 3 and 22), and the clock they are measured on
 * (`/proc/uptime`). Pure: text in, numbers out.
 *
 * Field 22, `starttime`, is the time the process started after boot in clock ticks (USER_HZ,
 * 100 per second on every Linux architecture Node runs on); `/proc/uptime` gives the same boot
 * clock (CLOCK_BOOTTIME, time namespaces applied alike) in seconds with two decimals, i.e. in
 * the same ticks. A PID whose start time changed is another process; a process that started
 * after a connection was accepted cannot be the one that connected.
 */

/** USER_HZ: the unit of `starttime`; 100 on every architecture Node supports. */
export const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcStat {
  /** Field 3: R, S, D, Z (zombie), X (dead), T, t, I, … */
  readonly state: string;
  /** Field 22, in clock ticks since boot. */
  readonly startTime: number;
}

/**
 * Fields 3 and 22 of a `/proc/<pid>/stat` line; undefined when it is not one. Field 2 (the
 * command name in parentheses) may itself hold spaces and parentheses: the fields after it start
 * after its *last* `)`.
 */
export function parseProcStat(content: string): ProcStat | undefined {
  const close = content.lastIndexOf(')');
  if (close < 0) return undefined;
  const fields = content.slice(close + 1).trim().split(' ');
  const state = fields[0];
  const startText = fields[22 - 3];
  if (state === undefined || !/^[A-Za-z]$/.test(state) || startText === undefined || !/^\d+$/.test(startText)) return undefined;
  const startTime = Number(startText);
  return Number.isSafeInteger(startTime) ? { state, startTime } : undefined;
}

/** A process that exited: its PID is held until its parent reaps it, but it is gone. */
export function isExited(stat: ProcStat): boolean {
  return stat.state === 'Z' || stat.state === 'X' || stat.state === 'x';
}

/**
 * `/proc/uptime`'s first number in clock ticks, exactly (`1234.56` -> 123456, no floating point:
 * `1234.56 * 100` is 123455.99…). Undefined when it is not `<seconds>.<hundredths>`.
 */
export function parseUptimeTicks(content: string): number | undefined {
  const m = /^(\d+)\.(\d{2})\s/.exec(content);
  if (!m) return undefined;
  const ticks = Number(m[1]) * CLOCK_TICKS_PER_SECOND + Number(m[2]);
  return Number.isSafeInteger(ticks) ? ticks : undefined;
}
