/**
 * Test material for the CA tests: real roots/intermediates (pki), cacerts directories on disk,
 * CSRs, and `openssl verify` of issued chains (the independent check).
 */
import { execFile } from 'node:child_process';
import { mkdir, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { removeTempDir, tempDirSync } from '../../support/scratch.js';
import { createCsr, createIntermediateCa, createRootCa, exportPkcs8Pem, generateKeyPair, type CaCertificate } from '../../../src/pki/index.js';

const run = promisify(execFile);

export interface PluginCa {
  readonly root: CaCertificate;
  readonly intermediate: CaCertificate;
}

export async function makePluginCa(name = 'Plug-in'): Promise<PluginCa> {
  const root = await createRootCa({ subject: `CN=${name} Root, O=certbroker-test`, ttlSeconds: 10 * 365 * 86400 });
  const intermediate = await createIntermediateCa({
    subject: `CN=${name} Intermediate, O=certbroker-test`,
    ttlSeconds: 365 * 86400,
    issuer: { cert: root.cert, privateKey: root.privateKey },
  });
  return { root, intermediate };
}

/** Writes an Istio cacerts directory; `extraRoots` are appended to root-cert.pem (rotation). */
export async function writeCacerts(dir: string, ca: PluginCa, extraRoots: readonly CaCertificate[] = []): Promise<void> {
  await writeFile(join(dir, 'ca-key.pem'), exportPkcs8Pem(ca.intermediate.privateKey).reveal());
  await writeFile(join(dir, 'cert-chain.pem'), ca.intermediate.pem + ca.root.pem);
  await writeFile(join(dir, 'root-cert.pem'), [ca.root.pem, ...extraRoots.map((r) => r.pem)].join(''));
  await writeFile(join(dir, 'ca-cert.pem'), ca.intermediate.pem);
}

let generation = 0;

/**
 * Writes the bundle the way the kubelet updates a Secret volume: the files live in a fresh
 * timestamped directory, `..data` is atomically re-pointed at it (symlink + rename), and the
 * visible names are symlinks through `..data`. Readers never see a half-written bundle.
 */
export async function writeCacertsAtomic(dir: string, files: Readonly<Record<string, string>>): Promise<void> {
  const gen = `..gen_${process.pid}_${++generation}`;
  await mkdir(join(dir, gen));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, gen, name), text);
  const tmpLink = join(dir, `..data_tmp_${generation}`);
  await symlink(gen, tmpLink);
  await rename(tmpLink, join(dir, '..data'));
  for (const name of Object.keys(files)) {
    try {
      await symlink(join('..data', name), join(dir, name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

/** The four cacerts files for `ca`; `extraRoots` are appended to root-cert.pem (rotation). */
export function cacertsFiles(ca: PluginCa, extraRoots: readonly CaCertificate[] = []): Record<string, string> {
  return {
    'ca-cert.pem': ca.intermediate.pem,
    'ca-key.pem': exportPkcs8Pem(ca.intermediate.privateKey).reveal(),
    'cert-chain.pem': ca.intermediate.pem + ca.root.pem,
    'root-cert.pem': [ca.root.pem, ...extraRoots.map((r) => r.pem)].join(''),
  };
}

export async function tempDir(prefix = 'ca-test-'): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = tempDirSync(prefix);
  return { path, remove: () => removeTempDir(path) };
}

export async function newCsr(uri = 'spiffe://cluster.local/ns/ignored/sa/ignored'): Promise<string> {
  const { privateKey } = await generateKeyPair();
  return createCsr({ privateKey, uri }).pem;
}

/**
 * `openssl verify -x509_strict` of a CreateCertificate response chain: the last element is the
 * root bundle (trusted), the middle elements are untrusted intermediates, the first is the leaf.
 * The leaf is checked for every purpose in `purposes`, by default both `sslclient` and
 * `sslserver` (a workload certificate is for both ends of mTLS, as istiod's are). Returns
 * openssl's stdout of the last check; throws (with stderr) when any check fails.
 */
export async function opensslVerifyChain(chain: readonly string[], options: { readonly purposes?: readonly string[] } = {}): Promise<string> {
  const dir = await tempDir('ca-verify-');
  try {
    const leaf = join(dir.path, 'leaf.pem');
    const roots = join(dir.path, 'roots.pem');
    const untrusted = join(dir.path, 'untrusted.pem');
    await writeFile(leaf, chain[0] ?? '');
    await writeFile(roots, chain[chain.length - 1] ?? '');
    await writeFile(untrusted, chain.slice(1, -1).join(''));
    let stdout = '';
    for (const purpose of options.purposes ?? ['sslclient', 'sslserver']) {
      const args = ['verify', '-x509_strict', '-purpose', purpose, '-CAfile', roots, ...(chain.length > 2 ? ['-untrusted', untrusted] : []), leaf];
      ({ stdout } = await run('openssl', args));
    }
    return stdout;
  } finally {
    await dir.remove();
  }
}

/** The text form of a certificate from openssl (for checks openssl owns, e.g. extension criticality). */
export async function opensslText(pem: string): Promise<string> {
  const dir = await tempDir('ca-x509-');
  try {
    const f = join(dir.path, 'c.pem');
    await writeFile(f, pem);
    const { stdout } = await run('openssl', ['x509', '-noout', '-text', '-in', f]);
    return stdout;
  } finally {
    await dir.remove();
  }
}
