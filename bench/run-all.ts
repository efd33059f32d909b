/**
 * `npm run bench`: runs every compiled `*.bench.js` next to this file (churn.bench.js among them, in
 * its short form; `BENCH_CHURN_LONG=1` for 1,000 nodes x 30 identities), one after another (never
 * in parallel: they would measure each other), each in its own process. The long optional ones
 * (`*.long.js`: the pod index at 150,000 pods, minutes and ~3 GB) run too when named in
 * `BENCH_OPTIONAL` (comma-separated, e.g. `BENCH_OPTIONAL=pod-index npm run bench`), or on their own
 * (`npm run bench:pod-index`).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchToolHints } from '../test/support/tools.js';

const here = dirname(fileURLToPath(import.meta.url));
const optional = new Set((process.env.BENCH_OPTIONAL ?? '').split(',').map((s) => s.trim()).filter((s) => s !== ''));
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.js') || (f.endsWith('.long.js') && optional.has(f.slice(0, -'.long.js'.length))))
  .sort();
// Nothing is installed here: say up front what is missing and how to get it.
for (const hint of benchToolHints()) process.stdout.write(`${hint}\n`);
let failed = 0;
for (const f of files) {
  process.stdout.write(`\n=== ${f} ===\n`);
  const r = spawnSync(process.execPath, [join(here, f), ...process.argv.slice(2)], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    process.stdout.write(`${f} exited with ${r.status ?? r.signal}\n`);
  }
}
process.exitCode = failed === 0 ? 0 : 1;
