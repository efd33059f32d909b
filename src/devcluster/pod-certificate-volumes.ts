/**
 * podCertificate projected volume sources (core/v1 PodCertificateProjection, Kubernetes 1.35)
 * as the simulated kubelet reads them from a pod, and the files it projects for one: the
 * credential bundle (private key PEM, then the certificate chain) at `credentialBundlePath`,
 * the key alone at `keyPath`, the chain alone at `certificateChainPath`, in
 * `<podsDir>/<pod UID>/volumes/kubernetes.io~projected/<volume>/` as a kubelet lays them out.
 */
import { join, normalize, isAbsolute } from 'node:path';
import { writeFileAtomic } from '../ops/atomic-file.js';
import { ensurePrivateDir } from '../ops/private-dir.js';
import type { KubeObject } from './store.js';

export interface PodCertificateSource {
  readonly volumeName: string;
  readonly sourceIndex: number;
  readonly signerName: string;
  readonly keyType: string;
  readonly maxExpirationSeconds?: number;
  readonly credentialBundlePath?: string;
  readonly keyPath?: string;
  readonly certificateChainPath?: string;
  readonly userAnnotations?: Readonly<Record<string, string>>;
  /** The projected volume's defaultMode (0644 when unset, as the API server defaults it). */
  readonly mode: number;
}

interface RawVolume {
  name?: unknown;
  projected?: { defaultMode?: unknown; sources?: Array<{ podCertificate?: Record<string, unknown> }> };
}

const optString = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** Every podCertificate source of the pod, in volume and source order. */
export function podCertificateSources(pod: KubeObject): PodCertificateSource[] {
  const volumes = ((pod.spec as { volumes?: unknown } | undefined)?.volumes ?? []) as RawVolume[];
  if (!Array.isArray(volumes)) return [];
  const out: PodCertificateSource[] = [];
  for (const v of volumes) {
    const sources = v?.projected?.sources;
    if (typeof v?.name !== 'string' || !Array.isArray(sources)) continue;
    const mode = typeof v.projected?.defaultMode === 'number' ? v.projected.defaultMode : 0o644;
    sources.forEach((s, i) => {
      const pc = s?.podCertificate;
      if (!pc || typeof pc !== 'object') return;
      const annotations = pc.userAnnotations && typeof pc.userAnnotations === 'object' ? (pc.userAnnotations as Record<string, string>) : undefined;
      out.push({
        volumeName: v.name as string,
        sourceIndex: i,
        signerName: String(pc.signerName ?? ''),
        keyType: String(pc.keyType ?? ''),
        ...(typeof pc.maxExpirationSeconds === 'number' ? { maxExpirationSeconds: pc.maxExpirationSeconds } : {}),
        ...(optString(pc.credentialBundlePath) ? { credentialBundlePath: optString(pc.credentialBundlePath)! } : {}),
        ...(optString(pc.keyPath) ? { keyPath: optString(pc.keyPath)! } : {}),
        ...(optString(pc.certificateChainPath) ? { certificateChainPath: optString(pc.certificateChainPath)! } : {}),
        ...(annotations ? { userAnnotations: annotations } : {}),
        mode,
      });
    });
  }
  return out;
}

/** The volume directory of a pod's projected volume. */
export function projectedVolumeDir(podsDir: string, podUid: string, volumeName: string): string {
  return join(podsDir, podUid, 'volumes', 'kubernetes.io~projected', volumeName);
}

/** kubelet's cleanCertificateChain: each PEM block re-encoded as CERTIFICATE, headers and text between blocks dropped. */
export function cleanCertificateChain(chain: string): string {
  const blocks = [...chain.matchAll(/-----BEGIN [A-Z0-9 ]+-----([\s\S]*?)-----END [A-Z0-9 ]+-----/g)];
  return blocks
    .map((b) => {
      const body = b[1]!.split('\n').filter((line) => line.trim() !== '' && !line.includes(':')).join('').replace(/\s+/g, '');
      const lines = body.match(/.{1,64}/g) ?? [];
      return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
    })
    .join('');
}

function safeRelative(p: string): boolean {
  const n = normalize(p);
  return !isAbsolute(n) && n !== '..' && !n.startsWith('../');
}

/** Writes the source's files (each replaced whole); paths that leave the volume are skipped. */
export async function writeCredentialFiles(dir: string, source: PodCertificateSource, keyPem: string, chainPem: string): Promise<void> {
  const files: Array<[string | undefined, string]> = [
    [source.credentialBundlePath, keyPem + chainPem],
    [source.keyPath, keyPem],
    [source.certificateChainPath, chainPem],
  ];
  for (const [rel, content] of files) {
    if (rel === undefined || !safeRelative(rel)) continue;
    const path = join(dir, rel);
    await ensurePrivateDir(join(path, '..'));
    await writeFileAtomic(path, content, { mode: source.mode });
  }
}
