/**
 * The filesystem adapter for an Istio `cacerts` directory: reads the four files and hands
 * them to the pure `validateCaBundle`. A partial bundle (some files missing) is
 * ERR_PKI_CACERTS_MISSING naming every missing file.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { validateCaBundle, CACERTS_FILES } from './ca-bundle.js';
import type { CaKeyMaterial } from './ca-material.js';
import { PkiError } from './errors.js';

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
