/**
 * What the CA publishes, as plain data (no I/O): the root bundle (every root the signer trusts,
 * each once, PEM with a trailing newline, in the signer's order), the per-namespace ConfigMap
 * istiod writes (`istio-ca-root-cert`, key `root-cert.pem`, label `istio.io/config=true`), and
 * the signer-linked ClusterTrustBundle (`<signerName with / as :>:root-cert`). Each
 * `*Update` function says whether a stored object differs from what it should be and gives the
 * object to write (other keys, labels and annotations kept).
 */

import { createHash } from 'node:crypto';
import { ISTIO_CONFIG_LABEL, ROOT_CERT_CONFIGMAP, ROOT_CERT_CONFIGMAP_KEY } from '../../protocol/istio-ca.js';

/** istiod's per-namespace root ConfigMap (pilot's CACertNamespaceConfigMap) and its data key. */
export const ROOT_CONFIGMAP_NAME = ROOT_CERT_CONFIGMAP;
export const ROOT_CONFIGMAP_KEY = ROOT_CERT_CONFIGMAP_KEY;
/** The label istiod puts on it. */
export const ROOT_CONFIGMAP_LABELS: Readonly<Record<string, string>> = Object.freeze({ [ISTIO_CONFIG_LABEL]: 'true' });
/** Marks the ClusterTrustBundle as written by a certbroker CA (any installation). */
export const TRUST_BUNDLE_LABELS: Readonly<Record<string, string>> = Object.freeze({ 'app.kubernetes.io/managed-by': 'certbroker-ca' });
/** Names the installation (its publisher Lease) that wrote the bundle: only it deletes or rewrites it. */
export const TRUST_BUNDLE_INSTALLATION_LABEL = 'certbroker.io/ca-installation';
const LABEL_VALUE = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/**
 * The installation label's value for the publisher Lease `leaseName` in `namespace`:
 * `<namespace>.<leaseName>` (unambiguous: a namespace has no dot) when that is a label value of
 * at most 63 characters, else `h-` and 40 hex digits of its SHA-256.
 */
export function trustBundleInstallation(namespace: string, leaseName: string): string {
  const plain = `${namespace}.${leaseName}`;
  if (plain.length <= 63 && LABEL_VALUE.test(plain)) return plain;
  return `h-${createHash('sha256').update(`${namespace}/${leaseName}`).digest('hex').slice(0, 40)}`;
}

/** The labels of the bundle the installation `installation` writes. */
export function trustBundleLabels(installation: string): Readonly<Record<string, string>> {
  return { ...TRUST_BUNDLE_LABELS, [TRUST_BUNDLE_INSTALLATION_LABEL]: installation };
}
/** The suffix of the bundle's name after the signer part (istiod names its bundle `istio.io:istiod-ca:root-cert`). */
export const TRUST_BUNDLE_NAME_SUFFIX = 'root-cert';

/** The roots as one PEM text: each root once, newline-terminated, in order; '' for none. */
export function rootBundlePem(roots: readonly string[]): string {
  const seen = new Set<string>();
  let out = '';
  for (const r of roots) {
    const pem = r.trim();
    if (pem === '' || seen.has(pem)) continue;
    seen.add(pem);
    out += `${pem}\n`;
  }
  return out;
}

/** `<signerName with / as :>:root-cert`, the name kube-apiserver requires for a signer-linked bundle. */
export function trustBundleName(signerName: string): string {
  return `${signerName.replaceAll('/', ':')}:${TRUST_BUNDLE_NAME_SUFFIX}`;
}

/** The metadata fields a write carries over from the stored object (never timestamps or managedFields). */
export interface StoredMeta {
  readonly name?: string;
  readonly namespace?: string;
  readonly resourceVersion?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly ownerReferences?: readonly unknown[];
  readonly finalizers?: readonly string[];
}

export interface StoredConfigMap {
  readonly metadata?: StoredMeta;
  readonly data?: Readonly<Record<string, string>>;
  readonly binaryData?: Readonly<Record<string, string>>;
}

export interface StoredTrustBundle {
  readonly metadata?: StoredMeta;
  readonly spec?: { readonly signerName?: string; readonly trustBundle?: string };
}

/** The certificate blocks of a PEM text, whitespace-free, in order (text between blocks ignored). */
function certificateBlocks(text: string): string[] {
  return [...text.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)].map((m) => m[1]!.replace(/\s+/g, ''));
}

/**
 * True when `stored` holds the same certificates as `bundle`, in the same order, however it is
 * laid out (line length, blank lines, a missing final newline): another writer of the same roots
 * (istiod, from the same `cacerts`) is not overwritten back and forth over whitespace.
 */
function sameCertificates(stored: string | undefined, bundle: string): boolean {
  if (stored === undefined) return false;
  const a = certificateBlocks(stored);
  const b = certificateBlocks(bundle);
  return a.length > 0 && a.length === b.length && a.every((x, i) => x === b[i]);
}

function hasLabels(have: Readonly<Record<string, string>> | undefined, want: Readonly<Record<string, string>>): boolean {
  return Object.entries(want).every(([k, v]) => have?.[k] === v);
}

function carriedMeta(m: StoredMeta | undefined, labels: Readonly<Record<string, string>>): StoredMeta {
  return {
    ...(m?.name ? { name: m.name } : {}),
    ...(m?.namespace ? { namespace: m.namespace } : {}),
    ...(m?.resourceVersion ? { resourceVersion: m.resourceVersion } : {}),
    labels: { ...(m?.labels ?? {}), ...labels },
    ...(m?.annotations ? { annotations: { ...m.annotations } } : {}),
    ...(m?.ownerReferences ? { ownerReferences: [...m.ownerReferences] } : {}),
    ...(m?.finalizers ? { finalizers: [...m.finalizers] } : {}),
  };
}

export function desiredConfigMap(namespace: string, bundle: string): StoredConfigMap {
  return { metadata: { name: ROOT_CONFIGMAP_NAME, namespace, labels: { ...ROOT_CONFIGMAP_LABELS } }, data: { [ROOT_CONFIGMAP_KEY]: bundle } };
}

/** The ConfigMap to write over `stored` (its other keys kept), or undefined when it is right. */
export function configMapUpdate(stored: StoredConfigMap, bundle: string): StoredConfigMap | undefined {
  if (sameCertificates(stored.data?.[ROOT_CONFIGMAP_KEY], bundle) && hasLabels(stored.metadata?.labels, ROOT_CONFIGMAP_LABELS)) return undefined;
  return {
    metadata: carriedMeta(stored.metadata, ROOT_CONFIGMAP_LABELS),
    data: { ...(stored.data ?? {}), [ROOT_CONFIGMAP_KEY]: bundle },
    ...(stored.binaryData ? { binaryData: { ...stored.binaryData } } : {}),
  };
}

export function desiredTrustBundle(signerName: string, bundle: string, installation: string): StoredTrustBundle {
  return { metadata: { name: trustBundleName(signerName), labels: trustBundleLabels(installation) }, spec: { signerName, trustBundle: bundle } };
}

/** The ClusterTrustBundle to write over `stored` (labelled as `installation`'s), or undefined when it is right. */
export function trustBundleUpdate(stored: StoredTrustBundle, signerName: string, bundle: string, installation: string): StoredTrustBundle | undefined {
  const labels = trustBundleLabels(installation);
  if (sameCertificates(stored.spec?.trustBundle, bundle) && stored.spec?.signerName === signerName && hasLabels(stored.metadata?.labels, labels)) return undefined;
  return { metadata: carriedMeta(stored.metadata, labels), spec: { signerName, trustBundle: bundle } };
}
