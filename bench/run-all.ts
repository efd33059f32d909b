/**
 * `npm run bench`: runs every compiled `*.bench.js` next to this file (churn.bench.js among them, in
 * its short form; `BENCH_CHURN_LONG=1` for 1,000 nodes x 30 identities), one after another (never
 * in parallel: they would measure each other), each in its own process.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchToolHints } from '../test/support/tools.js';

const here = dirname(fileURLToPath(import.meta.url));
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.js'))
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
