/**
 * The Istio CA front's TLS identity: the broker's own SVID issued with serving names (DNS
 * `localhost`, IP `127.0.0.1`, a configured alt host name), so ztunnel verifying
 * `CA_ADDRESS=https://localhost:15012` against the mesh root accepts it. Fed by its certificate
 * manager entry (rotated at half-life like the Broker API's SVID); never presents an expired
 * certificate: at notAfter, by the broker's clock, it is withdrawn and new connections are
 * refused until the renewal arrives.
 */
import type { Clock } from '../../../core/clock.js';
import { RotatingServerIdentity } from '../../../grpc/rotating-credentials.js';
import { workloadCertPem, type WorkloadCert } from '../../cache/workload-cert.js';

export interface FrontServingIdentityOptions {
  readonly clock: Clock;
  /** Called when the certificate served reaches its notAfter and is withdrawn. */
  readonly onExpired?: (cert: WorkloadCert) => void;
}

export class FrontServingIdentity {
  readonly #identity = new RotatingServerIdentity();
  readonly #o: FrontServingIdentityOptions;
  #expiry: AbortController | undefined;
  #notAfter: number | undefined;

  constructor(options: FrontServingIdentityOptions) {
    this.#o = options;
  }

  /** Serves `cert` from now on; false (and nothing served) when it has already expired. */
  set(cert: WorkloadCert): boolean {
    this.#expiry?.abort();
    this.#expiry = undefined;
    const now = this.#o.clock.now();
    if (now >= cert.notAfter) {
      this.#withdraw();
      return false;
    }
    const { certChainPem, privateKeyPem } = workloadCertPem(cert);
    this.#identity.update(certChainPem, privateKeyPem);
    this.#notAfter = cert.notAfter;
    const expiry = new AbortController();
    this.#expiry = expiry;
    this.#o.clock.sleep(cert.notAfter - now, expiry.signal).then(
      () => {
        if (this.#expiry !== expiry) return;
        this.#expiry = undefined;
        this.#withdraw();
        this.#o.onExpired?.(cert);
      },
      () => undefined,
    );
    return true;
  }

  get hasIdentity(): boolean {
    return this.#identity.hasIdentity;
  }

  /** notAfter (ms since epoch) of the certificate served, undefined while none is. */
  get servingNotAfter(): number | undefined {
    return this.#notAfter;
  }

  /** The certificate and key to present (the transport follows its updates; none after a withdrawal). */
  get serving(): RotatingServerIdentity {
    return this.#identity;
  }

  close(): void {
    this.#expiry?.abort();
    this.#expiry = undefined;
  }

  #withdraw(): void {
    this.#notAfter = undefined;
    this.#identity.withdraw();
  }
}
