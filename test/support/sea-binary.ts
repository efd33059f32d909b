/**
 * The packaged CNI binaries for tests: `scripts/build-sea.mjs` builds them once into
 * build/test-sea/<hash>/ (the hash covers every file esbuild bundles, and the node binary), and
 * every later test run or file reuses them. A lock directory keeps two test files running in
 * parallel from building the same thing twice. CERTBROKER_CNI_BIN_DIR points tests at
 * prebuilt binaries instead.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';
import { build } from 'esbuild';

const here = fileURLToPath(new URL('.', import.meta.url));
/** dist/test/support -> repo root */
export const REPO_ROOT = resolve(here, '../../..');

const BUNDLE_DEFINITION = 'scripts/esbuild-options.mjs';

/**
 * The bundle entries and esbuild options scripts/build-sea.mjs uses, loaded from the repository
 * (a plain .mjs that tsc does not copy into dist/; its types come from the .d.mts beside it).
 */
export function seaBundleDefinition(): Promise<typeof import('../../scripts/esbuild-options.mjs')> {
  return import(pathToFileURL(join(REPO_ROOT, BUNDLE_DEFINITION)).href) as Promise<typeof import('../../scripts/esbuild-options.mjs')>;
}

/** Every file the bundles are made from (esbuild's own view of the imports), hashed with node's identity. */
async function sourceHash(): Promise<string> {
  const h = createHash('sha256');
  h.update(process.execPath + statSync(process.execPath).size);
  const inputs = new Set<string>([join(REPO_ROOT, 'scripts/build-sea.mjs'), join(REPO_ROOT, BUNDLE_DEFINITION)]);
  const { SEA_ENTRIES, seaBundleOptions } = await seaBundleDefinition();
  for (const { entry } of SEA_ENTRIES) {
    const r = await build({ ...seaBundleOptions(REPO_ROOT, entry), write: false, metafile: true, logLevel: 'silent' });
    for (const f of Object.keys(r.metafile.inputs)) inputs.add(resolve(REPO_ROOT, f));
  }
  for (const f of [...inputs].sort()) {
    h.update(f);
    h.update(readFileSync(f));
  }
  return h.digest('hex').slice(0, 16);
}

function lockAgeMs(lock: string): number {
  try {
    return Date.now() - statSync(lock).mtimeMs;
  } catch {
    return 0;
  }
}

export interface SeaBinaries {
  readonly dir: string;
  readonly istioCni: string;
  readonly istioIptables: string;
  /** Build time in ms, or 0 when reused. */
  readonly buildMs: number;
}

export async function seaBinaries(): Promise<SeaBinaries> {
  const prebuilt = process.env.CERTBROKER_CNI_BIN_DIR;
  if (prebuilt) {
    return { dir: prebuilt, istioCni: join(prebuilt, 'istio-cni'), istioIptables: join(prebuilt, 'istio-iptables'), buildMs: 0 };
  }
  const base = join(REPO_ROOT, 'build/test-sea');
  const dir = join(base, await sourceHash());
  const result = (buildMs: number): SeaBinaries => ({
    dir,
    istioCni: join(dir, 'istio-cni'),
    istioIptables: join(dir, 'istio-iptables'),
    buildMs,
  });
  const done = join(dir, '.complete');
  if (existsSync(done)) return result(0);
  mkdirSync(base, { recursive: true });
  const lock = join(base, '.lock');
  for (let waited = 0; ; waited += 200) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (existsSync(done)) return result(0);
      // A lock left by a killed run (older than any real build) is taken over.
      if (waited > 0 && lockAgeMs(lock) > 600_000) rmSync(lock, { recursive: true, force: true });
      await delay(200);
    }
  }
  try {
    if (existsSync(done)) return result(0);
    // Builds of older sources go once nobody can still be using them (a run in progress elsewhere
    // keeps its directory for the hour).
    for (const old of readdirSync(base)) {
      const p = join(base, old);
      if (old !== '.lock' && Date.now() - statSync(p).mtimeMs > 3_600_000) rmSync(p, { recursive: true, force: true });
    }
    const started = Date.now();
    const r = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts/build-sea.mjs'), '--out-dir', dir], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`build-sea failed: ${r.stderr}`);
    mkdirSync(done);
    return result(Date.now() - started);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}
