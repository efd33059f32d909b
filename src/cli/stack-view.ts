/** The live view of `certbroker start`: the broker's certificates and what the consumer receives. */
import type { Broker } from '../broker/broker.js';
import { CONSUMER_SA, NODE, SYSTEM_NS, TD, type ConsumerView } from './stack-parts.js';

function fmtIn(ms: number | undefined, now: number): string {
  if (ms === undefined) return '-';
  const s = Math.round((ms - now) / 1000);
  if (s < 0) return `${-s}s ago`;
  return s >= 120 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

function pad(s: string, n: number): string {
  return s.length >= n ? s.slice(0, n) : s + ' '.repeat(n - s.length);
}

export function renderStackView(broker: Broker, consumers: ReadonlyMap<string, ConsumerView>, startedAt: number, info: string[]): string {
  const now = Date.now();
  const lines: string[] = [];
  lines.push(`certbroker local stack — up ${fmtIn(startedAt, now).replace(' ago', '')} — ${new Date(now).toISOString()}`);
  lines.push(...info, '');
  lines.push(`node broker for ${NODE} (own identity ${broker.ownIdentity}), ready=${broker.ready}`);
  lines.push(
    `${pad('IDENTITY', 42)} ${pad('STATE', 7)} ${pad('SERIAL', 10)} ${pad('EXPIRES IN', 10)} ${pad('NEXT FETCH', 10)} PODS`,
  );
  for (const s of broker.snapshot().sort((a, b) => a.identity.localeCompare(b.identity))) {
    lines.push(
      `${pad(s.identity.replace(`spiffe://${TD}`, ''), 42)} ${pad(s.state, 7)} ${pad((s.serial ?? '-').slice(0, 8), 10)} ${pad(fmtIn(s.notAfter, now), 10)} ${pad(fmtIn(s.nextAttemptAt, now), 10)} ${s.pods.map((p) => `${p.namespace}/${p.name}`).join(', ') || '(none: forgetting)'}`,
    );
  }
  lines.push('', `consumer ${`spiffe://${TD}/ns/${SYSTEM_NS}/sa/${CONSUMER_SA}`} subscribed over the Broker API:`);
  lines.push(`${pad('POD', 16)} ${pad('SERIAL', 10)} ${pad('EXPIRES IN', 10)} MESSAGES`);
  for (const [pod, v] of [...consumers].sort()) {
    lines.push(`${pad(pod, 16)} ${pad(v.serial.slice(0, 8) || '-', 10)} ${pad(fmtIn(v.notAfter || undefined, now), 10)} ${v.messages}${v.ended ? `  (ended: ${v.ended})` : ''}`);
  }
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
