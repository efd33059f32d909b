import type { BuildOptions } from 'esbuild';

export interface SeaEntry {
  readonly name: string;
  /** Relative to the repository root. */
  readonly entry: string;
}

export declare const SEA_ENTRIES: readonly SeaEntry[];

export declare function seaBundleOptions(root: string, entry: string): BuildOptions;
