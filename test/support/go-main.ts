/**
 * Builds one of our Go programs (a single main.go) from Debian's Go sources in GOPATH mode,
 * offline, and keeps the binary in the OS temp directory (`<tmp>/certbroker-<name>/<name>-<key>`)
 * under a key made from main.go, what decides the build (package versions) and the Go version, so
 * a machine builds each version once. Used by step-ca.ts (the step-ca the step-ca signer's tests
 * run) and grpc-go.ts (the grpc-go interop client).
 */
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface GoMain {
  /** The cache directory's and the binary's name. */
  readonly name: string;
  /** The program's main.go (copied into a GOPATH package directory of its own for the build). */
  readonly main: string;
  /** What else decides the build (e.g. `dpkg-query` versions of the Go source packages). */
  readonly versions: string;
  /** cgo on (a dependency with C parts) or off. */
  readonly cgo: boolean;
  /** Keep Go's build cache beside the binary, so an edited main.go rebuilds in seconds (else it is thrown away with the build). */
  readonly keepBuildCache: boolean;
}

/** The binary for `m`: the cached one, or built now (then cached). */
export async function goMainBinary(m: GoMain): Promise<string> {
  const go = spawnSync('go', ['version'], { encoding: 'utf8' }).stdout;
  const key = createHash('sha256').update(readFileSync(m.main)).update('\0').update(m.versions).update('\0').update(go).digest('hex').slice(0, 16);
  const cacheDir = join(tmpdir(), `certbroker-${m.name}`);
  const binary = join(cacheDir, `${m.name}-${key}`);
  if (existsSync(binary)) return binary;
  await mkdir(cacheDir, { recursive: true });
  const work = await mkdtemp(join(cacheDir, 'build-'));
  try {
    const out = join(work, m.name);
    const gocache = m.keepBuildCache ? join(cacheDir, 'gocache') : join(work, 'gocache');
    const env = { ...process.env, GO111MODULE: 'off', GOPATH: `${work}/gopath:/usr/share/gocode`, GOCACHE: gocache, GOFLAGS: '', CGO_ENABLED: m.cgo ? '1' : '0' };
    // Built from a copy of main.go, so the package directory holds nothing but it.
    const pkg = join(work, `gopath/src/certbroker-${m.name}`);
    await mkdir(pkg, { recursive: true });
    await writeFile(join(pkg, 'main.go'), await readFile(m.main));
    await run('go', ['build', '-o', out, '.'], { cwd: pkg, env, maxBuffer: 16 << 20 });
    await rename(out, binary); // atomic: a concurrent build's result is equally good
    return binary;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
