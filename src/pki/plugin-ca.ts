/**
 * Makes an Istio plug-in CA bundle (pure: returns the texts): a self-signed root and an
 * intermediate signed by it, laid out as Istio's `cacerts` expects —
 * root-cert.pem, ca-cert.pem, ca-key.pem, cert-chain.pem (ca-cert then root) — plus
 * root-key.pem so more intermediates can be minted later. The bundle is validated with
 * `validateCaBundle` before it is returned.
 */
import { validateCaBundle, type CaBundleTexts } from './ca-bundle.js';
import { createIntermediateCa, createRootCa } from './ca-certs.js';
import { PkiError } from './errors.js';
import { exportPkcs8Pem, type KeySpec } from './keys.js';
import { Secret } from '../core/secret.js';

export const KEY_TYPES = ['ec-p256', 'ec-p384', 'rsa-2048', 'rsa-3072', 'rsa-4096'] as const;
export type KeyType = (typeof KEY_TYPES)[number];

export function keySpecForType(type: string): KeySpec {
  switch (type) {
    case 'ec-p256':
      return { kind: 'ec', curve: 'P-256' };
    case 'ec-p384':
      return { kind: 'ec', curve: 'P-384' };
    case 'rsa-2048':
      return { kind: 'rsa', bits: 2048 };
    case 'rsa-3072':
      return { kind: 'rsa', bits: 3072 };
    case 'rsa-4096':
      return { kind: 'rsa', bits: 4096 };
    default:
      throw new PkiError('ERR_PKI_KEY_UNSUPPORTED', `key type ${JSON.stringify(type)} is not one of ${KEY_TYPES.join('|')}`);
  }
}

export interface PluginCaOptions {
  readonly rootSubject: string;
  readonly caSubject: string;
  readonly rootTtlSeconds: number;
  readonly caTtlSeconds: number;
  readonly keyType: KeyType;
  readonly nowMs: number;
}

export interface PluginCaBundle extends CaBundleTexts {
  readonly rootKeyPem: Secret<string>;
}

export async function makePluginCaBundle(options: PluginCaOptions): Promise<PluginCaBundle> {
  const keySpec = keySpecForType(options.keyType);
  const root = await createRootCa({ subject: options.rootSubject, ttlSeconds: options.rootTtlSeconds, keySpec, nowMs: options.nowMs });
  const ca = await createIntermediateCa({
    subject: options.caSubject,
    ttlSeconds: options.caTtlSeconds,
    keySpec,
    nowMs: options.nowMs,
    issuer: { cert: root.cert, privateKey: root.privateKey },
  });
  const bundle: PluginCaBundle = {
    rootCertPem: root.pem,
    rootKeyPem: exportPkcs8Pem(root.privateKey),
    caCertPem: ca.pem,
    caKeyPem: exportPkcs8Pem(ca.privateKey).reveal(),
    certChainPem: ca.pem + root.pem,
  };
  validateCaBundle(bundle, options.nowMs);
  return bundle;
}
