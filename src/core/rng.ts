/** Randomness as a parameter: an `Rng` returns a float in [0, 1), like Math.random. */
export type Rng = () => number;

export const systemRng: Rng = Math.random;

/**
 * `base` spread uniformly over ±`fraction`: `jitter(1000, 0.1, () => 0) === 900`,
 * `jitter(1000, 0.1, () => 0.5) === 1000`, and values approach 1100 as rng approaches 1.
 */
export function jitter(base: number, fraction: number, rng: Rng): number {
  return base * (1 - fraction + 2 * fraction * rng());
}
