/**
 * What the signer benches share: CreateCertificate against several CAs (one per signer) from one
 * grpc-js client each, latency one call at a time interleaved across the CAs, then throughput
 * with calls in flight for a few seconds per CA, in rounds alternating the order, each compared
 * with the baseline CA of the same round (the median per-round ratio).
 */
import type { CaClient } from '../test/ca/support/ca-env.js';
import { median, pct } from './report.js';

export interface Side {
  readonly name: string;
  readonly client: CaClient;
}

export interface CompareOptions {
  readonly token: string;
  readonly impersonate: string;
  readonly csrs: readonly string[];
  readonly samples: number;
  readonly inflight: number;
  readonly seconds: number;
  readonly rounds: number;
  /** Calls per side before measuring (TLS, TokenReview cache, keep-alive). */
  readonly warmup?: number;
  /**
   * Pause after each latency call, outside the measured window, so work a call leaves behind in
   * this process (the CSR path's delete and watch events) does not land in the next side's call.
   */
  readonly settleMs?: number;
  /** Called right before and right after the latency run (e.g. to read another process's CPU). */
  readonly onLatencyRun?: (phase: 'start' | 'end') => void;
}

export interface Comparison {
  /** Ascending latencies (ms) per side. */
  readonly latencies: readonly (readonly number[])[];
  /** Certificates per second per side, one per round. */
  readonly rates: readonly (readonly number[])[];
}

async function once(side: Side, o: CompareOptions, csr: string): Promise<void> {
  const res = await side.client.create({ token: o.token, csr, impersonate: o.impersonate });
  if (!res.chain) throw new Error(`${side.name}: ${JSON.stringify(res)}`);
}

async function throughput(side: Side, o: CompareOptions): Promise<number> {
  const until = performance.now() + o.seconds * 1000;
  let count = 0;
  await Promise.all(
    Array.from({ length: o.inflight }, async (_, i) => {
      for (let k = i; performance.now() < until; k += o.inflight) {
        await once(side, o, o.csrs[k % o.csrs.length]!);
        count++;
      }
    }),
  );
  return count / o.seconds;
}

/** Warms up, then runs the latency and the throughput measurements. */
export async function compareSides(sides: readonly Side[], o: CompareOptions): Promise<Comparison> {
  for (const side of sides) for (let i = 0; i < (o.warmup ?? 20); i++) await once(side, o, o.csrs[i % o.csrs.length]!);
  const latencies = sides.map(() => [] as number[]);
  o.onLatencyRun?.('start');
  for (let i = 0; i < o.samples; i++) {
    for (const [s, side] of sides.entries()) {
      const t0 = performance.now();
      await once(side, o, o.csrs[i % o.csrs.length]!);
      latencies[s]!.push(performance.now() - t0);
      if (o.settleMs) await new Promise((r) => setTimeout(r, o.settleMs));
    }
  }
  o.onLatencyRun?.('end');
  for (const l of latencies) l.sort((a, b) => a - b);
  const rates = sides.map(() => [] as number[]);
  for (let round = 0; round < o.rounds; round++) {
    const order = round % 2 === 0 ? [...sides.keys()] : [...sides.keys()].reverse();
    for (const s of order) rates[s]!.push(await throughput(sides[s]!, o));
  }
  return { latencies, rates };
}

/** Markdown rows: name, p50, p99, median certificates/s, median per-round ratio to `baseline`. */
export function comparisonRows(sides: readonly Side[], c: Comparison, baseline: number): string[] {
  const fmt = (n: number) => n.toFixed(2);
  const ratio = (s: number) => median(c.rates[s]!.map((r, round) => r / c.rates[baseline]![round]!));
  return sides.map((side, s) => {
    const l = c.latencies[s]!;
    return `| ${side.name} | ${fmt(pct(l, 50))} | ${fmt(pct(l, 99))} | ${Math.round(median(c.rates[s]!))} | ${s === baseline ? '1.00x' : `${fmt(ratio(s))}x`} |`;
  });
}
