/**
 * The filesystem adapter for an Istio `cacerts` directory: reads the four files and hands
 * them to the pure `validateCaBundle`. A partial bundle (some files missing) is
 * ERR_PKI_CACERTS_MISSING naming every missing file.
 */
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../ops/atomic-file.js';
import { ensurePrivateDir } from '../ops/private-dir.js';
import { validateCaBundle, CACERTS_FILES } from './ca-bundle.js';
import type { CaKeyMaterial } from './ca-material.js';
import { errCode } from '../core/errors.js';
import { PkiError } from './errors.js';
import type { PluginCaBundle } from './plugin-ca.js';

export async function loadCaCertsDir(dir: string, nowMs: number = Date.now()): Promise<CaKeyMaterial> {
  const texts = new Map<string, string>();
  const missing: string[] = [];
  for (const name of CACERTS_FILES) {
    try {
      texts.set(name, await readFile(join(dir, name), 'utf8'));
    } catch (err) {
      if (errCode(err) === 'ENOENT') missing.push(name);
      else throw new PkiError('ERR_PKI_CACERTS_MISSING', `cannot read ${join(dir, name)}: ${(err as Error).message}`, err);
    }
  }
  if (missing.length > 0) {
    throw new PkiError('ERR_PKI_CACERTS_MISSING', `CA directory ${dir} is incomplete: missing ${missing.join(', ')}`);
  }
  return validateCaBundle(
    {
      caCertPem: texts.get('ca-cert.pem')!,
      caKeyPem: texts.get('ca-key.pem')!,
      certChainPem: texts.get('cert-chain.pem')!,
      rootCertPem: texts.get('root-cert.pem')!,
    },
    nowMs,
  );
}

/**
 * Writes a plug-in CA bundle into `dir` (created if needed): the four cacerts files plus
 * root-key.pem (a directory it creates is 0700 whatever the umask); keys with mode 0600, certificates 0644, each through a fresh temp file and a
 * rename (`writeFileAtomic`). Refuses to overwrite an existing bundle unless `force`; anything
 * at one of the names (a dangling symlink included) counts as existing.
 */
export async function writeCaCertsDir(dir: string, bundle: PluginCaBundle, force = false): Promise<string[]> {
  await ensurePrivateDir(dir);
  const files: Array<[string, string, number]> = [
    ['root-cert.pem', bundle.rootCertPem, 0o644],
    ['root-key.pem', bundle.rootKeyPem.reveal(), 0o600],
    ['ca-cert.pem', bundle.caCertPem, 0o644],
    ['ca-key.pem', bundle.caKeyPem, 0o600],
    ['cert-chain.pem', bundle.certChainPem, 0o644],
  ];
  if (!force) {
    for (const [name] of files) {
      const exists = await lstat(join(dir, name)).then(
        () => true,
        () => false,
      );
      if (exists) throw new PkiError('ERR_PKI_CACERTS_INCONSISTENT', `${join(dir, name)} already exists (use --force to replace the bundle)`);
    }
  }
  const written: string[] = [];
  for (const [name, content, mode] of files) {
    const path = join(dir, name);
    await writeFileAtomic(path, content, { mode, sync: true });
    written.push(path);
  }
  return written;
}
