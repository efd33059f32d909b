import type { BuildOptions } from 'esbuild';

export interface SeaEntry {
  readonly name: string;
  /** Relative to the repository root. */
  readonly entry: string;
  /**
   * How V8 starts it: `snapshot` (sea config `useSnapshot`: the bundle is evaluated at build time
   * and its entry registers `v8.startupSnapshot.setDeserializeMainFunction`) or `code-cache`
   * (`useCodeCache`: compiled code shipped, evaluated at each start).
   */
  readonly startup: 'snapshot' | 'code-cache';
}

export declare const SEA_ENTRIES: readonly SeaEntry[];

export declare function seaBundleOptions(root: string, entry: string): BuildOptions;
