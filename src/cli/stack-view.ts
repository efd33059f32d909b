/**
 * The live view of `certbroker start`: the broker's certificates, its three fronts (Broker API,
 * Workload API, Istio CA front) and what a sample client of each holds — identity, serial,
 * expiry, last rotation — as received on the front's real socket.
 */
import type { Broker } from '../broker/broker.js';
import type { IstioCaSample, WorkloadSample } from './stack-clients.js';
import type { SampleView } from './stack-sample-view.js';
import { NODE, TD, type StackConsumer } from './stack-parts.js';

function fmtIn(ms: number | undefined, now: number): string {
  if (ms === undefined) return '-';
  const s = Math.round((ms - now) / 1000);
  if (s < 0) return `${-s}s ago`;
  return s >= 120 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

function pad(s: string, n: number): string {
  return s.length >= n ? s.slice(0, n) : s + ' '.repeat(n - s.length);
}

const short = (id: string) => id.replace(`spiffe://${TD}`, '');

export interface StackViewInputs {
  readonly broker: Broker;
  /** The Broker API's sample client. */
  readonly consumer: StackConsumer;
  readonly workload: WorkloadSample;
  readonly istioCa: IstioCaSample;
  readonly startedAt: number;
  readonly info: readonly string[];
}

/** One table of a sample client: a row per key (pod or identity) with what it holds. */
function sampleRows(first: string, views: ReadonlyMap<string, SampleView>, now: number, count: string): string[] {
  const lines = [`  ${pad(first, 30)} ${pad('SERIAL', 10)} ${pad('EXPIRES IN', 10)} ${pad('LAST ROTATION', 13)} ${count}`];
  for (const [key, v] of [...views].sort(([a], [b]) => a.localeCompare(b))) {
    lines.push(
      `  ${pad(short(key), 30)} ${pad(v.serial.slice(0, 8) || '-', 10)} ${pad(fmtIn(v.notAfter || undefined, now), 10)} ${pad(fmtIn(v.lastRotationAt, now), 13)} ${v.messages}${v.problem ? `  (${v.problem})` : ''}`,
    );
  }
  return lines;
}

export function renderStackView(v: StackViewInputs): string {
  const { broker } = v;
  const now = Date.now();
  const lines: string[] = [];
  lines.push(`certbroker local stack — up ${fmtIn(v.startedAt, now).replace(' ago', '')} — ${new Date(now).toISOString()}`);
  lines.push(...v.info, '');
  lines.push(`node broker for ${NODE} (own identity ${broker.ownIdentity}), ready=${broker.ready}`);
  lines.push(`${pad('IDENTITY', 42)} ${pad('STATE', 7)} ${pad('SERIAL', 10)} ${pad('EXPIRES IN', 10)} ${pad('NEXT FETCH', 10)} PODS`);
  for (const s of broker.snapshot().sort((a, b) => a.identity.localeCompare(b.identity))) {
    lines.push(
      `${pad(short(s.identity), 42)} ${pad(s.state, 7)} ${pad((s.serial ?? '-').slice(0, 8), 10)} ${pad(fmtIn(s.notAfter, now), 10)} ${pad(fmtIn(s.nextAttemptAt, now), 10)} ${s.pods.map((p) => `${p.namespace}/${p.name}`).join(', ') || '(none: forgetting)'}`,
    );
  }
  const serving = broker.istioCaFrontCerts?.current(broker.ownIdentity);
  lines.push('', 'fronts:');
  lines.push(`  Broker API      unix://${broker.brokerSocketPath} (mTLS; SubscribeToX509SVID for node pods)`);
  lines.push(`  Workload API    ${broker.workloadApiSocketPath ? `unix://${broker.workloadApiSocketPath} (callers attested from the kernel: PID -> cgroup -> pod)` : 'off'}`);
  lines.push(
    `  Istio CA front  ${broker.istioCaFrontPort ? `https://127.0.0.1:${broker.istioCaFrontPort} (TLS as localhost; serving cert ${serving ? `${serving.serial.slice(0, 8)}, expires in ${fmtIn(serving.notAfter, now)}` : 'none yet'})` : 'off'}`,
  );
  lines.push('', `Broker API client ${short(v.consumer.identity)} (mTLS with its SVID from the CA, expires in ${fmtIn(v.consumer.notAfter, now)}), one stream per ${NODE} pod:`);
  lines.push(...sampleRows('POD', v.consumer.views, now, 'MESSAGES'));
  lines.push('', `Workload API client, FetchX509SVID: ${v.workload.status}`);
  if (v.workload.running) lines.push(...sampleRows('IDENTITY', v.workload.views, now, 'MESSAGES'));
  lines.push('', `Istio CA client like ztunnel, CreateCertificate through the front as ${v.istioCa.caller}:`);
  lines.push(...sampleRows('IDENTITY', v.istioCa.views, now, 'ISSUED'));
  const m = broker.certs;
  lines.push('', `CA calls ${m.caCalls}, in flight ${m.inFlight}, queued ${m.queued}. Pods on node-2 get nothing from this broker. Ctrl-C stops everything.`);
  return lines.join('\n');
}

/**
 * The function that prints the view once: on a terminal it redraws the screen every time;
 * otherwise it prints only when something besides the clock changed.
 */
export function viewPrinter(print: (text: string) => void, tty: boolean, render: () => string): () => void {
  let last = '';
  return () => {
    const view = render();
    const comparable = view.replace(/^.*\n/, '').replace(/\b\d+m?\d*s( ago)?\b/g, '');
    if (tty) print(`\x1b[2J\x1b[H${view}`);
    else if (comparable !== last) print(view + '\n');
    last = comparable;
  };
}
