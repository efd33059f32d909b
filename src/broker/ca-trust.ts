/**
 * What the broker's CA clients verify the CA's TLS certificate against: the configured mesh
 * roots (`CA_ROOT_CERT_FILE`) plus the trust bundle's roots (learnt from the CA's answers over
 * connections already verified). Both move during a root rotation: the bundle with the answers,
 * the file when the operator (or a publisher of the mesh root ConfigMap) updates it — the file is
 * looked at every `pollIntervalMs` (default 30 s, src/ops/reread-file.ts) and a change that holds
 * a certificate is taken. Every client added gets the union at once and after every change
 * (`trustRoots`: its next channel), so the CA's serving certificate moving to a new root does not
 * cut the broker off, even before its next answer brought that root.
 */
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { RereadFile } from '../ops/reread-file.js';
import { certificateToPem, parsePem } from '../pki/pem.js';
import type { TrustBundle } from './cache/trust-bundle.js';

/** Something that verifies a TLS peer against PEM roots it can be given again. */
export interface TrustTarget {
  trustRoots(rootsPem: string): void;
}

/** Default interval between looks at the configured root file. */
export const CA_ROOT_FILE_POLL_MS = 30_000;

export class CaTrust {
  readonly #bundle: TrustBundle;
  readonly #clients = new Set<TrustTarget>();
  #configured: string;

  constructor(bundle: TrustBundle, configuredRootsPem: string) {
    this.#bundle = bundle;
    this.#configured = configuredRootsPem;
    bundle.onChange(() => this.#apply());
  }

  /** The roots the CA's TLS certificate may chain to now. */
  get pem(): string {
    return unionPem(this.#configured, this.#bundle.pem);
  }

  /** Keeps `clients` on the current roots from now on. */
  add(...clients: TrustTarget[]): void {
    const pem = this.pem;
    for (const c of clients) {
      this.#clients.add(c);
      c.trustRoots(pem);
    }
  }

  /**
   * Looks at `path` every `pollIntervalMs` until `signal` aborts; a changed file that holds a
   * certificate replaces the configured roots (one that does not, or cannot be read, is logged).
   */
  followFile(path: string, o: { readonly clock: Clock; readonly logger: Logger; readonly signal: AbortSignal; readonly pollIntervalMs?: number }): void {
    const file = new RereadFile(path);
    void (async () => {
      await file.read().catch(() => undefined); // the content at start is what the config read
      while (!o.signal.aborted) {
        try {
          await o.clock.sleep(o.pollIntervalMs ?? CA_ROOT_FILE_POLL_MS, o.signal);
        } catch {
          return;
        }
        try {
          const { text, changed } = await file.read();
          if (!changed || text === this.#configured) continue;
          if (!text.includes('-----BEGIN CERTIFICATE-----')) throw new Error('holds no PEM certificate');
          this.#configured = text;
          o.logger.info('CA root file changed; the CA connection trusts its roots now', { path });
          this.#apply();
        } catch (err) {
          o.logger.warn('CA root file not usable; keeping the roots in use', { path, err: describeError(err) });
        }
      }
    })();
  }

  #apply(): void {
    const pem = this.pem;
    for (const c of this.#clients) c.trustRoots(pem);
  }
}

function unionPem(...texts: string[]): string {
  const seen = new Set<string>();
  let out = '';
  for (const b of texts.flatMap((t) => parsePem(t)).filter((b) => b.type === 'CERTIFICATE')) {
    const der = Buffer.from(b.der);
    if (seen.has(der.toString('base64'))) continue;
    seen.add(der.toString('base64'));
    out += certificateToPem(der);
  }
  return out;
}
