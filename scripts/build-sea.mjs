#!/usr/bin/env node
// Packages the CNI binaries as Node single executable applications (SEA), so install-cni can
// copy them to /opt/cni/bin on hosts without Node.js:
//   1. esbuild bundles each entry (TypeScript source, all dependencies) into one CommonJS file
//      (entries and options: scripts/esbuild-options.mjs);
//   2. `node --experimental-sea-config` turns the bundle into a preparation blob (with a V8
//      startup snapshot or a code cache, per entry: `startup` in scripts/esbuild-options.mjs);
//   3. a copy of this node binary gets the blob injected with postject (sentinel fuse below).
// Usage: node scripts/build-sea.mjs [--out-dir build/bin] [--only istio-cni|istio-iptables]
// Output: <out-dir>/istio-cni and <out-dir>/istio-iptables (~100 MB each: the node runtime).
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { copyFileSync, chmodSync, existsSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SEA_ENTRIES, seaBundleOptions } from './esbuild-options.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

function arg(name) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const outDir = resolve(root, arg('--out-dir') ?? 'build/bin');
const only = arg('--only');
const work = join(outDir, '.sea-work');
mkdirSync(work, { recursive: true });

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) {
    process.stderr.write(`${cmd} ${args.join(' ')} failed (exit ${r.status}):\n${r.stderr}\n`);
    process.exit(1);
  }
}

const postject = join(root, 'node_modules', '.bin', 'postject');
let built = 0;
for (const t of SEA_ENTRIES) {
  if (only !== undefined && only !== t.name) continue;
  const entry = join(root, t.entry);
  if (!existsSync(entry)) {
    process.stderr.write(`build-sea: ${t.entry} does not exist; skipping ${t.name}\n`);
    continue;
  }
  const started = Date.now();
  const bundle = join(work, `${t.name}.cjs`);
  await build({ ...seaBundleOptions(root, t.entry), outfile: bundle });
  const seaConfig = join(work, `${t.name}.sea.json`);
  const blob = join(work, `${t.name}.blob`);
  writeFileSync(
    seaConfig,
    JSON.stringify({
      main: bundle,
      output: blob,
      disableExperimentalSEAWarning: true,
      ...(t.startup === 'snapshot' ? { useSnapshot: true } : { useCodeCache: true }),
    }),
  );
  run(process.execPath, ['--experimental-sea-config', seaConfig]);
  const out = join(outDir, t.name);
  rmSync(out, { force: true });
  copyFileSync(process.execPath, out);
  chmodSync(out, 0o755);
  run(postject, [out, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', FUSE]);
  built++;
  process.stdout.write(`build-sea: ${out} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
}
rmSync(work, { recursive: true, force: true });
if (built === 0) {
  process.stderr.write('build-sea: nothing built\n');
  process.exit(1);
}
