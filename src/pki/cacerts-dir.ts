/**
 * The filesystem adapter for an Istio `cacerts` directory: reads the four files and hands
 * them to the pure `validateCaBundle`. A partial bundle (some files missing) is
 * ERR_PKI_CACERTS_MISSING naming every missing file.
 */
import { constants } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { validateCaBundle, CACERTS_FILES } from './ca-bundle.js';
import type { CaKeyMaterial } from './ca-material.js';
import { PkiError } from './errors.js';
import type { PluginCaBundle } from './plugin-ca.js';

export async function loadCaCertsDir(dir: string, nowMs: number = Date.now()): Promise<CaKeyMaterial> {
  const texts = new Map<string, string>();
  const missing: string[] = [];
  for (const name of CACERTS_FILES) {
    try {
      texts.set(name, await readFile(join(dir, name), 'utf8'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') missing.push(name);
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
 * Writes `content` to `path` as a new file: a random temp name in the same directory opened with
 * O_CREAT|O_EXCL|O_NOFOLLOW, its mode set explicitly (whatever the umask), then renamed over
 * `path`. So an existing file's mode is never inherited (a 0644 `ca-key.pem` becomes 0600),
 * and a symlink at `path` or at a guessable temp name is replaced, never written through.
 */
async function replaceFile(path: string, content: string, mode: number): Promise<void> {
  const tmp = `${path}.${randomBytes(8).toString('hex')}.tmp`;
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    await fh.chmod(mode);
    await fh.writeFile(content);
    await fh.sync();
    await fh.close();
    await rename(tmp, path);
  } catch (err) {
    await fh.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * Writes a plug-in CA bundle into `dir` (created if needed): the four cacerts files plus
 * root-key.pem; keys with mode 0600, certificates 0644, each through a fresh temp file and a
 * rename (see `replaceFile`). Refuses to overwrite an existing bundle unless `force`; anything
 * at one of the names (a dangling symlink included) counts as existing.
 */
export async function writeCaCertsDir(dir: string, bundle: PluginCaBundle, force = false): Promise<string[]> {
  await mkdir(dir, { recursive: true });
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
    await replaceFile(path, content, mode);
    written.push(path);
  }
  return written;
}
