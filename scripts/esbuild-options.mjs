// How the CNI executables are bundled, in one place: scripts/build-sea.mjs packages these
// bundles as single executables, test/support/sea-binary.ts hashes the files they are made from,
// and bench/cni.bench.ts runs the same bundle under plain node. Types: esbuild-options.d.mts.
import { join } from 'node:path';

/**
 * The executables install-cni ships, the entry each is bundled from, and how V8 starts it: both
 * with a code cache. istio-cni's entry also supports `snapshot` (it defers to v8.startupSnapshot
 * while one is built): measured in the same run, a snapshot starts VERSION faster (0.93 vs 1.03 x
 * `node -e 0`) but makes ADD slower (ambient 1.88 vs 1.41, sidecar dry-run 3.54 vs 3.43: the
 * modules ADD imports on demand run without cached code), so ADD's code cache wins (docs/benchmarks.md).
 */
export const SEA_ENTRIES = Object.freeze([
  Object.freeze({ name: 'istio-cni', entry: 'src/cni/plugin/main.ts', startup: 'code-cache' }),
  Object.freeze({ name: 'istio-iptables', entry: 'src/cni/iptables/main.ts', startup: 'code-cache' }),
]);

/**
 * esbuild options for one entry (relative to `root`): the TypeScript source and every
 * dependency in one minified CommonJS file for Node 20, the form a SEA blob takes. Callers add
 * where it goes (`outfile`, or `write: false`) and how loud esbuild is.
 */
export function seaBundleOptions(root, entry) {
  return {
    absWorkingDir: root,
    entryPoints: [join(root, entry)],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    minify: true,
    legalComments: 'none',
    logLevel: 'warning',
  };
}
