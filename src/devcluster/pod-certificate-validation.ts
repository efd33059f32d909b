/**
 * Pod validation of `podCertificate` projected volume sources (core/v1
 * PodCertificateProjection, Kubernetes 1.35), so a pod the real API server would refuse is
 * refused here too instead of leaving the simulated kubelet retrying: a valid signerName, one of
 * kubelet's key types, maxExpirationSeconds in the signer's range when set, at least one of
 * credentialBundlePath/keyPath/certificateChainPath, each a relative path that does not climb
 * out of the volume, no path twice in the volume, domain-prefixed userAnnotations keys.
 */
import { expirationCauses, signerNameCauses, userAnnotationCauses } from './pcr-validation.js';
import { POD_CERTIFICATE_KEY_TYPES } from './pod-certificate-keys.js';
import type { StatusCause } from './status.js';

const PATH_FIELDS = ['credentialBundlePath', 'keyPath', 'certificateChainPath'] as const;

function pathCauses(field: string, v: unknown): StatusCause[] {
  if (typeof v !== 'string') return [{ field, reason: 'FieldValueTypeInvalid', message: 'Invalid value: must be a string' }];
  if (v.startsWith('/')) return [{ field, message: `Invalid value: "${v}": must be a relative path` }];
  if (v.split('/').includes('..')) return [{ field, message: `Invalid value: "${v}": must not contain '..'` }];
  return [];
}

function sourceCauses(at: string, pc: Record<string, unknown>, paths: Set<string>): StatusCause[] {
  const signer = typeof pc.signerName === 'string' ? pc.signerName : '';
  const out = [...signerNameCauses(signer, `${at}.signerName`)];
  const keyType = pc.keyType;
  if (keyType === undefined || keyType === '') out.push({ field: `${at}.keyType`, reason: 'FieldValueRequired', message: 'Required value' });
  else if (!(POD_CERTIFICATE_KEY_TYPES as readonly unknown[]).includes(keyType)) {
    out.push({ field: `${at}.keyType`, reason: 'FieldValueNotSupported', message: `Unsupported value: ${JSON.stringify(keyType)}: supported values: ${POD_CERTIFICATE_KEY_TYPES.map((k) => `"${k}"`).join(', ')}` });
  }
  if (pc.maxExpirationSeconds !== undefined && pc.maxExpirationSeconds !== null) out.push(...expirationCauses(signer, pc.maxExpirationSeconds, `${at}.maxExpirationSeconds`));
  const set = PATH_FIELDS.filter((f) => pc[f] !== undefined && pc[f] !== '');
  if (set.length === 0) out.push({ field: at, reason: 'FieldValueRequired', message: `Required value: must specify at least one of ${PATH_FIELDS.join(', ')}` });
  for (const f of set) {
    out.push(...pathCauses(`${at}.${f}`, pc[f]));
    const p = String(pc[f]);
    if (paths.has(p)) out.push({ field: `${at}.${f}`, message: `Invalid value: "${p}": conflicting duplicate paths` });
    paths.add(p);
  }
  out.push(...userAnnotationCauses(pc.userAnnotations, `${at}.userAnnotations`));
  return out;
}

/** The causes for every podCertificate source of a pod spec's volumes. */
export function podCertificateSourceCauses(spec: Record<string, unknown>): StatusCause[] {
  const volumes = spec.volumes;
  if (!Array.isArray(volumes)) return [];
  const out: StatusCause[] = [];
  volumes.forEach((v: { projected?: { sources?: unknown } } | null, i) => {
    const sources = v?.projected?.sources;
    if (!Array.isArray(sources)) return;
    const paths = new Set<string>();
    sources.forEach((s: { podCertificate?: unknown } | null, j) => {
      const pc = s?.podCertificate;
      if (pc && typeof pc === 'object' && !Array.isArray(pc)) out.push(...sourceCauses(`spec.volumes[${i}].projected.sources[${j}].podCertificate`, pc as Record<string, unknown>, paths));
    });
  });
  return out;
}
