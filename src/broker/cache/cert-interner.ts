/**
 * How the certificate manager holds a fetched certificate: the leaf and the key copied into
 * buffers of their own exact size, the intermediates and roots shared by every identity that
 * got the same ones. A CA client's buffers are often views into a larger one (a gRPC message,
 * Node's 8 KiB allocation pool) that a cached view keeps alive whole for the certificate's
 * lifetime; ten thousand identities under one intermediate and root need one copy of those.
 * Shared buffers are held weakly: a root no entry uses any more is collected. Plain TypeScript.
 */
import { createHash } from 'node:crypto';
import { Secret } from '../../core/secret.js';
import type { WorkloadCert } from './workload-cert.js';

/** A copy of `der` in an ArrayBuffer of exactly its size (not a slice of a shared pool). */
function exactCopy(der: Uint8Array): Buffer {
  const out = Buffer.allocUnsafeSlow(der.length);
  out.set(der);
  return out;
}

function digest(der: Uint8Array): string {
  return createHash('sha256').update(der).digest('base64');
}

/** Values by key, held weakly: an entry goes when its value is collected. */
class WeakValues<V extends object> {
  readonly #refs = new Map<string, WeakRef<V>>();
  readonly #gone = new FinalizationRegistry<string>((key) => {
    if (this.#refs.get(key)?.deref() === undefined) this.#refs.delete(key);
  });

  get size(): number {
    return this.#refs.size;
  }

  /** The value held under `key`, or the one `make` returns (then held). */
  get(key: string, make: () => V): V {
    const held = this.#refs.get(key)?.deref();
    if (held !== undefined) return held;
    const value = make();
    this.#refs.set(key, new WeakRef(value));
    this.#gone.register(value, key);
    return value;
  }
}

export class CertInterner {
  readonly #certs = new WeakValues<Buffer>();
  readonly #lists = new WeakValues<readonly Buffer[]>();

  /** Distinct shared certificates (intermediates, roots) held now. */
  get sharedCertificates(): number {
    return this.#certs.size;
  }

  /**
   * `cert` as the manager keeps it: same content, leaf and key in exact-size buffers of their
   * own, intermediates and roots (and the roots list) shared; `identity` (the entry's key) used
   * for the string when it is the same.
   */
  hold(identity: string, cert: WorkloadCert): WorkloadCert {
    const [leaf, ...intermediates] = cert.chainDer;
    const chainDer = leaf === undefined ? [] : [exactCopy(leaf), ...intermediates.map((d) => this.#shared(d))];
    return {
      identity: cert.identity === identity ? identity : cert.identity,
      chainDer,
      rootsDer: this.#sharedList(cert.rootsDer),
      privateKey: new Secret(exactCopy(cert.privateKey.reveal())),
      serial: cert.serial,
      notBefore: cert.notBefore,
      notAfter: cert.notAfter,
    };
  }

  #shared(der: Buffer, key = digest(der)): Buffer {
    return this.#certs.get(key, () => exactCopy(der));
  }

  #sharedList(ders: readonly Buffer[]): readonly Buffer[] {
    const keys = ders.map(digest);
    return this.#lists.get(keys.join(' '), () => Object.freeze(ders.map((d, i) => this.#shared(d, keys[i]))));
  }
}
