/**
 * What the benches share for reporting: order statistics over samples, and the section of
 * docs/benchmarks.md each bench owns between `<!-- bench:<name>:start -->` and `...:end -->`.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The p-th percentile (nearest rank) of ascending `sorted`. */
export function pct(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new Error('pct of no samples');
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/** The median of `xs` in any order (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new Error('median of no samples');
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export interface DocSection {
  /** The repository root (docs/benchmarks.md lives under it). */
  readonly root: string;
  /** The marker name: `cni` -> `<!-- bench:cni:start -->`. */
  readonly marker: string;
  /** The `## ...` heading used when the section does not exist yet. */
  readonly heading: string;
  readonly body: string;
  /** Write here instead of `<root>/docs/benchmarks.md`. */
  readonly file?: string;
}

/** Replaces the bench's marked section of docs/benchmarks.md with `body`, or appends it under `heading`. */
export function writeDocSection(s: DocSection): void {
  const file = s.file ?? join(s.root, 'docs/benchmarks.md');
  const start = `<!-- bench:${s.marker}:start -->`;
  const end = `<!-- bench:${s.marker}:end -->`;
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const section = `${start}\n${s.body}\n${end}`;
  const a = text.indexOf(start);
  const b = text.indexOf(end);
  if (a >= 0 && b > a) writeFileSync(file, text.slice(0, a) + section + text.slice(b + end.length));
  else writeFileSync(file, `${text.trimEnd()}\n\n## ${s.heading}\n\n${section}\n`);
}
