/** CPU accounting of another process, from the kernel's /proc. */
import { readFileSync } from 'node:fs';

/** User + system CPU seconds (all threads) of `pid` so far: /proc/<pid>/stat fields 14 and 15, in 100 Hz ticks. */
export function procCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // After the comm (which may hold spaces and parentheses): field 3 is index 0, so 14 and 15 are 11 and 12.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
