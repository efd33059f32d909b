/**
 * `module:<path-or-package>`: a `SignerModule` of the integrator's (signer-module.ts) behind the
 * CA's `Signer` interface. The CA verifies the CSR first (signature, key kind) and gives the
 * module the validated identity, the key, the TTL and an AbortSignal; what the module returns is
 * checked (module-result.ts) before anyone sees it. Module errors become statuses: a
 * `SignerRefusal` is PERMISSION_DENIED (ERR_CA_MODULE_REFUSED, the module's message), anything
 * else thrown UNAVAILABLE (ERR_CA_MODULE_FAILED, cause logged, not sent), a module that does not
 * answer within `timeoutMs` has its signal aborted and the call answered DEADLINE_EXCEEDED
 * (ERR_CA_MODULE_TIMEOUT) at once, whatever the module does afterwards.
 */
import { setMaxListeners } from 'node:events';
import { isIP } from 'node:net';
import type { Clock } from '../../core/clock.js';
import { deadline } from '../../core/deadline.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { Listeners } from '../../core/listeners.js';
import { parseCsrAsync } from '../../pki/csr.js';
import { exportPkcs8Pem, exportSpkiDer, generateKeyPair } from '../../pki/keys.js';
import { pemEncode } from '../../pki/pem.js';
import { CaError } from '../errors.js';
import { isSignerRefusal, type SignerModule, type SignerModuleRequest, type SignerModuleResult } from '../signer-module.js';
import type { ServingCertificate, SignedChain, Signer, SignRequest } from '../signer.js';
import { badResult, certificateDers, checkModuleResult } from './module-result.js';

export interface ModuleSignerSettings {
  /** The loaded module's default export. */
  readonly module: SignerModule;
  /** Where it came from (the `module:` specifier), for logs. */
  readonly specifier: string;
  /** How long one `sign` may take. */
  readonly timeoutMs: number;
}

export interface ModuleSignerOptions extends ModuleSignerSettings {
  readonly clock: Clock;
  readonly logger: Logger;
}

const MAX_REFUSAL_MESSAGE = 200;

function notReady(why: string): CaError {
  return new CaError('ERR_CA_SIGNER_NOT_READY', `signer not ready: ${why}`, { status: 'unavailable', publicMessage: 'CA is not ready' });
}

export class ModuleSigner implements Signer {
  readonly description: string;
  /** The module's signal also fires when the caller stops waiting. */
  readonly cancellable = true;
  readonly #o: ModuleSignerOptions;
  readonly #listeners = new Listeners<void>();
  readonly #closing = new AbortController();
  #roots: readonly string[] = [];
  #started = false;

  constructor(options: ModuleSignerOptions) {
    this.#o = options;
    // Every call in flight listens to it (the deadline's parent): no leak warning past ten.
    setMaxListeners(0, this.#closing.signal);
    this.description = options.module.description ?? `module:${options.specifier}`;
  }

  /** Runs the module's `start` hook and reads its roots; rejects (a start-up error) when either fails. */
  async start(): Promise<void> {
    const m = this.#o.module;
    const logger = this.#o.logger.child({ signerModule: this.#o.specifier });
    try {
      await m.start?.({
        signal: this.#closing.signal,
        changed: () => this.#changed(),
        log: (level, msg, fields) => logger[level](msg, fields ?? {}),
      });
    } catch (err) {
      throw new CaError('ERR_CA_MODULE_LOAD', `signer module ${this.#o.specifier}: start() failed: ${describeError(err)}`, { status: 'unavailable', cause: err });
    }
    this.#roots = this.#readRoots();
    this.#started = true;
    this.#emit();
  }

  get notReadyReason(): string | undefined {
    if (this.#closing.signal.aborted) return 'signer closed';
    if (!this.#started) return 'signer module not started';
    if (this.#roots.length === 0) return 'signer module has no roots';
    try {
      return this.#o.module.notReadyReason?.();
    } catch (err) {
      return `signer module notReadyReason() threw: ${describeError(err)}`;
    }
  }

  get ready(): boolean {
    return this.notReadyReason === undefined;
  }

  roots(): readonly string[] {
    return this.#roots;
  }

  async sign(request: SignRequest): Promise<SignedChain> {
    const csr = await parseCsrAsync(request.csrPem);
    const names = request.servingNames ?? [];
    const checked = await this.#call({
      purpose: 'workload',
      spiffeId: request.spiffeId,
      dnsNames: names.filter((n) => isIP(n) === 0),
      ipAddresses: names.filter((n) => isIP(n) !== 0),
      publicKey: csr.publicKey,
      spkiDer: csr.spki,
      ttlSeconds: request.ttlSeconds,
    }, request.signal);
    return checked;
  }

  async issueServingCertificate(request: { readonly dnsNames: readonly string[]; readonly ttlSeconds: number }): Promise<ServingCertificate> {
    const { privateKey, publicKey } = await generateKeyPair();
    const checked = await this.#call({
      purpose: 'serving',
      spiffeId: undefined,
      dnsNames: request.dnsNames.filter((n) => isIP(n) === 0),
      ipAddresses: request.dnsNames.filter((n) => isIP(n) !== 0),
      publicKey,
      spkiDer: exportSpkiDer(publicKey),
      ttlSeconds: request.ttlSeconds,
    });
    return { certChainPem: checked.certChain.slice(0, -1).join(''), privateKeyPem: exportPkcs8Pem(privateKey), notAfterMs: checked.notAfterMs };
  }

  onChange(listener: () => void): () => void {
    return this.#listeners.add(listener);
  }

  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort(new CaError('ERR_CA_SIGNER_NOT_READY', 'signer closed', { status: 'unavailable', publicMessage: 'CA is shutting down' }));
    this.#emit();
    this.#listeners.clear();
    try {
      await this.#o.module.close?.();
    } catch (err) {
      this.#o.logger.warn('signer module close() threw; ignored', { signerModule: this.#o.specifier, err: describeError(err) });
    }
  }

  /** One module call under the deadline; its result checked against the request. */
  async #call(fields: Omit<SignerModuleRequest, 'signal'>, caller?: AbortSignal): Promise<SignedChain> {
    const reason = this.notReadyReason;
    if (reason !== undefined) throw notReady(reason);
    // The module's signal fires at the deadline, at close, or when the caller stops waiting.
    const limit = deadline(this.#o.timeoutMs, { what: `signer module ${this.#o.specifier}`, parent: this.#closing.signal, caller, clock: this.#o.clock });
    try {
      const result = await this.#raced(this.#o.module.sign({ ...fields, signal: limit.signal }), limit.signal);
      return checkModuleResult(result, { ...fields, signal: limit.signal }, this.#o.clock.now());
    } catch (err) {
      throw this.#failure(err, limit.signal);
    } finally {
      limit.dispose();
    }
  }

  /** The module's promise, or a rejection as soon as `signal` fires (a module that ignores its signal is not waited for). */
  #raced(work: Promise<SignerModuleResult>, signal: AbortSignal): Promise<SignerModuleResult> {
    if (!(work instanceof Promise)) return Promise.reject(badResult('sign() did not return a promise'));
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      work.then(
        (v) => {
          signal.removeEventListener('abort', onAbort);
          resolve(v);
        },
        (e: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(e);
        },
      );
    });
  }

  #failure(err: unknown, signal: AbortSignal): CaError {
    if (err instanceof CaError) return err;
    if (signal.aborted && this.#closing.signal.aborted) return notReady('signer closed');
    if (signal.aborted) {
      return new CaError('ERR_CA_MODULE_TIMEOUT', `signer module ${this.#o.specifier} did not answer within ${this.#o.timeoutMs} ms`, {
        status: 'deadline-exceeded',
        publicMessage: 'signer did not answer in time',
      });
    }
    if (isSignerRefusal(err)) {
      const message = String(err.message).slice(0, MAX_REFUSAL_MESSAGE);
      return new CaError('ERR_CA_MODULE_REFUSED', `signer module ${this.#o.specifier} refused: ${message}`, { status: 'permission-denied', publicMessage: message || 'refused by the signer' });
    }
    return new CaError('ERR_CA_MODULE_FAILED', `signer module ${this.#o.specifier} failed: ${describeError(err)}`, { status: 'unavailable', cause: err, publicMessage: 'signer unavailable' });
  }

  #readRoots(): readonly string[] {
    let roots: ReturnType<SignerModule['roots']>;
    try {
      roots = this.#o.module.roots();
    } catch (err) {
      throw new CaError('ERR_CA_MODULE_LOAD', `signer module ${this.#o.specifier}: roots() threw: ${describeError(err)}`, { status: 'unavailable', cause: err });
    }
    if (!Array.isArray(roots) || roots.length === 0) throw new CaError('ERR_CA_MODULE_LOAD', `signer module ${this.#o.specifier}: roots() returned no roots`, { status: 'unavailable' });
    try {
      return roots.flatMap((r, i) => certificateDers(r, `roots()[${i}]`)).map((d) => pemEncode('CERTIFICATE', d));
    } catch (err) {
      throw new CaError('ERR_CA_MODULE_LOAD', `signer module ${this.#o.specifier}: ${describeError(err)}`, { status: 'unavailable', cause: err });
    }
  }

  #changed(): void {
    if (this.#closing.signal.aborted || !this.#started) return;
    try {
      this.#roots = this.#readRoots();
    } catch (err) {
      this.#o.logger.error('signer module roots unusable after changed(); keeping the previous roots', { signerModule: this.#o.specifier, err: describeError(err) });
    }
    this.#emit();
  }

  #emit(): void {
    this.#listeners.emit(undefined, (err) => this.#o.logger.warn('signer change listener threw; ignored', { err: describeError(err) }));
  }
}
