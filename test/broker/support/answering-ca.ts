/**
 * A CA double for CertManager tests on the injected clock: each call answers what `next` says
 * (an error to throw, or a one-hour certificate issued "now"), and the call times are kept so a
 * test can read the gaps the retry policy left between calls.
 */
import { Secret } from '../../../src/core/secret.js';
import type { CaClient, WorkloadCert } from '../../../src/broker/index.js';
import type { FakeClock } from '../../support/fake-clock.js';

const HOUR = 3_600_000;

export class AnsweringCa implements CaClient {
  readonly times: number[] = [];
  next: () => Error | 'certificate' = () => new Error('unset');
  constructor(private readonly clock: FakeClock) {}
  async fetchCertificate(identity: string): Promise<WorkloadCert> {
    this.times.push(this.clock.now());
    const answer = this.next();
    if (answer !== 'certificate') throw answer;
    const now = this.clock.now();
    return { identity, chainDer: [Buffer.from('leaf')], rootsDer: [Buffer.from('root')], privateKey: new Secret(Buffer.from('k')), serial: String(now), notBefore: now, notAfter: now + HOUR };
  }
  /** Milliseconds between consecutive calls. */
  gaps(): number[] {
    return this.times.slice(1).map((t, i) => t - this.times[i]!);
  }
}
