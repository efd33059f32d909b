/**
 * A signer whose material the test installs: the built-in signers' own base class
 * (`MaterialSigner`: fast-path issuance, serving certificates, change notification, expiry),
 * with the "where does the material come from" part left to the test instead of a Secret or a
 * cacerts directory.
 */
import { MaterialSigner, type MaterialSignerOptions } from '../../../src/ca/index.js';
import { createRootCa, rootCaKeyMaterial, type CaKeyMaterial } from '../../../src/pki/index.js';

export class InstalledSigner extends MaterialSigner {
  readonly description = 'installed by the test';

  constructor(options: MaterialSignerOptions) {
    super(options);
  }

  /** Installs `material` as the built-in signers do after loading it (listeners are told). */
  use(material: CaKeyMaterial): void {
    this.install(material);
  }
}

/** A fresh self-signed root as signing material. */
export async function rootMaterial(subject: string, options: { readonly ttlSeconds?: number; readonly nowMs?: number } = {}): Promise<CaKeyMaterial> {
  const nowMs = options.nowMs ?? Date.now();
  const root = await createRootCa({ subject, ttlSeconds: options.ttlSeconds ?? 365 * 86400, nowMs });
  return rootCaKeyMaterial({ cert: root.cert, keyObject: root.privateKey }, nowMs, subject);
}
