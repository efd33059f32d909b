/**
 * The plug-in CA read from a Kubernetes Secret instead of a mounted directory: the same four
 * keys as Istio's `cacerts` (ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem), validated
 * by pki's `validateCaBundle` as `CacertsSigner` does, followed by an informer on that one Secret
 * (field selector `metadata.name`, so RBAC can name it: get/list/watch with `resourceNames`). An
 * update that validates is installed at once (a rotation, no restart); one that does not, or a
 * deleted Secret, keeps the material in use and is logged. Until a first valid Secret is seen the
 * signer is not ready, with the reason. Used by `certbroker k8s-signer --cacerts-secret`.
 */
import type { KubeConfig, V1Secret } from '@kubernetes/client-node';
import { describeError } from '../../core/errors.js';
import { Informer, type InformerSettings } from '../../kube/index.js';
import { CACERTS_FILES, PkiError, validateCaBundle } from '../../pki/index.js';
import { MaterialSigner, type MaterialSignerOptions } from './material-signer.js';

export interface CacertsSecretSignerOptions extends MaterialSignerOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly name: string;
  readonly informer?: InformerSettings;
}

export class CacertsSecretSigner extends MaterialSigner {
  readonly description: string;
  readonly #o: CacertsSecretSignerOptions;
  readonly #informer: Informer<V1Secret>;
  /** resourceVersion of the Secret installed (or refused) last. */
  #seen: string | undefined;

  constructor(options: CacertsSecretSignerOptions) {
    super(options);
    this.#o = options;
    this.description = `cacerts-secret:${options.namespace}/${options.name}`;
    this.setNotReady(`secret ${options.namespace}/${options.name} not read yet`);
    this.#informer = new Informer<V1Secret>({
      kubeConfig: options.kubeConfig,
      path: `/api/v1/namespaces/${encodeURIComponent(options.namespace)}/secrets`,
      fieldSelector: `metadata.name=${options.name}`,
      resource: 'secrets',
      ...(options.informer ?? {}),
      clock: options.clock,
      logger: options.logger,
      onAdd: (s) => this.#load(s),
      onUpdate: (s) => this.#load(s),
      onDelete: () => options.logger.warn('cacerts secret deleted; keeping the CA in use', { secret: this.description }),
    });
  }

  /** Starts the watch; resolves once it has listed (ready if the Secret was there and valid). */
  async start(): Promise<void> {
    await this.#informer.start();
    await this.#informer.waitForSync();
    if (!this.material && this.#informer.list().length === 0) this.setNotReady(`secret ${this.#o.namespace}/${this.#o.name} does not exist`);
  }

  override async close(): Promise<void> {
    await this.#informer.stop();
    await super.close();
  }

  #load(secret: V1Secret): void {
    const rv = secret.metadata?.resourceVersion;
    if (rv !== undefined && rv === this.#seen) return;
    this.#seen = rv;
    const data = secret.data ?? {};
    try {
      const missing = CACERTS_FILES.filter((k) => typeof data[k] !== 'string');
      if (missing.length > 0) throw new PkiError('ERR_PKI_CACERTS_MISSING', `secret ${this.#o.namespace}/${this.#o.name} is incomplete: missing ${missing.join(', ')}`);
      const text = (k: (typeof CACERTS_FILES)[number]) => Buffer.from(data[k]!, 'base64').toString('utf8');
      const material = validateCaBundle({ caCertPem: text('ca-cert.pem'), caKeyPem: text('ca-key.pem'), certChainPem: text('cert-chain.pem'), rootCertPem: text('root-cert.pem') }, this.options.clock.now());
      this.install(material);
    } catch (err) {
      if (!this.material) this.setNotReady(`secret ${this.#o.namespace}/${this.#o.name}: ${describeError(err)}`);
      this.#o.logger.error(this.material ? 'cacerts secret update rejected; keeping the previous CA' : 'cacerts secret not usable', { secret: this.description, err: describeError(err) });
    }
  }
}
