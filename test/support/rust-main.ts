/**
 * Builds certbroker's Rust interop client (test/interop/rust-h2-client: hyper's HTTP/2 client over
 * tokio-rustls, the stack ztunnel's tonic runs on) from Debian's crate sources, offline: cargo with
 * crates-io replaced by the directory source /usr/share/cargo/registry (what Debian's own
 * packaging does), `--offline`, a CARGO_HOME of its own so no user config or registry cache takes
 * part. The binary is kept in the OS temp directory (`<tmp>/certbroker-rust-h2-client/`) under a
 * key made from Cargo.toml, main.rs, the Debian crate package versions and the cargo and rustc
 * versions, so a machine builds each version once; cargo's target directory (one per toolchain) is
 * kept beside it, so an edited main.rs rebuilds in ~15 s. A cold build (tokio, hyper, h2, rustls,
 * ring compiled) took 78 s on the 2 cores here with rustup's cargo 1.95 (load 3), 5 min with
 * Debian's cargo 0.66 / rustc 1.63 while the machine was busy (load 7; 2.6 min of CPU).
 *
 * cargo is the one on PATH, else rustup's ~/.cargo/bin/cargo; Debian's `cargo` package (0.66,
 * rustc 1.63) builds it too. `rustH2Missing()` says why a test must skip; `.ci/run` installs both.
 */
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from './fixtures.js';
import { spawnHeld, type HeldClient } from './held-client.js';

const run = promisify(execFile);

const NAME = 'rust-h2-client';
const CRATE_DIR = join(REPO_ROOT, 'test/interop/rust-h2-client');
const SOURCES = ['Cargo.toml', 'src/main.rs'];
const REGISTRY = '/usr/share/cargo/registry';
/** The crates Cargo.toml names (by the registry directory's name prefix) and their Debian packages. */
const CRATES: ReadonlyArray<readonly [string, string]> = [
  ['hyper-0.14.', 'librust-hyper-dev'],
  ['h2-0.3.', 'librust-h2-dev'],
  ['tokio-1.', 'librust-tokio-dev'],
  ['tokio-rustls-0.23.', 'librust-tokio-rustls-dev'],
  ['rustls-0.20.', 'librust-rustls-dev'],
  ['rustls-pemfile-1.', 'librust-rustls-pemfile-dev'],
];
export const RUST_H2_PACKAGES = CRATES.map(([, p]) => p);
const PACKAGE_BIN = 'certbroker-rust-h2-client';

/** cargo: the one on PATH, else rustup's default place; undefined when neither runs. */
function findCargo(): string | undefined {
  const onPath = (process.env.PATH ?? '').split(delimiter).map((d) => join(d, 'cargo'));
  for (const c of [...onPath, join(homedir(), '.cargo/bin/cargo')]) {
    if (existsSync(c) && spawnSync(c, ['--version'], { encoding: 'utf8' }).status === 0) return c;
  }
  return undefined;
}

let cargo: string | undefined;
let missing: string | undefined | null = null;

/** Why the Rust client cannot be built here (skip reason), or undefined. */
export function rustH2Missing(): string | undefined {
  if (missing !== null) return missing;
  cargo = findCargo();
  const present = existsSync(REGISTRY) ? readdirSync(REGISTRY) : [];
  const absent = CRATES.filter(([prefix]) => !present.some((d) => d.startsWith(prefix))).map(([prefix, pkg]) => `${prefix}x (${pkg})`);
  if (!cargo) missing = 'cargo is not installed (Debian package cargo, or rustup): the Rust h2/hyper interop client cannot be built';
  else if (absent.length > 0) missing = `Debian's Rust crate sources are missing from ${REGISTRY}: ${absent.join(', ')}`;
  else missing = undefined;
  return missing;
}

/** The cargo and rustc versions (rustc: the one beside cargo, else on PATH). */
function toolchain(): string {
  const env = { ...process.env, PATH: `${dirname(cargo!)}${delimiter}${process.env.PATH ?? ''}` };
  return [cargo!, 'rustc'].map((tool) => spawnSync(tool, ['--version'], { encoding: 'utf8', env }).stdout ?? '').join('');
}

/**
 * The environment cargo builds in: its own CARGO_HOME, a target directory per toolchain (rustup's
 * and Debian's cargo do not rebuild each other's), rustc beside cargo first on PATH.
 */
function cargoEnv(cacheDir: string, tools: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    CARGO_HOME: join(cacheDir, 'cargo-home'),
    CARGO_TARGET_DIR: join(cacheDir, `target-${createHash('sha256').update(tools).digest('hex').slice(0, 8)}`),
    PATH: `${dirname(cargo!)}${delimiter}${process.env.PATH ?? ''}`,
  };
  for (const k of Object.keys(env)) if (k.startsWith('CARGO_BUILD_') || k === 'RUSTFLAGS' || k === 'RUSTC') delete env[k];
  return env;
}

function buildKey(tools: string): string {
  const h = createHash('sha256');
  for (const s of SOURCES) h.update(readFileSync(join(CRATE_DIR, s))).update('\0');
  h.update(tools).update('\0');
  h.update(spawnSync('dpkg-query', ['-W', '-f', '${Package} ${Version}\n', ...RUST_H2_PACKAGES], { encoding: 'utf8' }).stdout ?? '');
  return h.digest('hex').slice(0, 16);
}

const CARGO_CONFIG = `[source.crates-io]\nreplace-with = "debian"\n[source.debian]\ndirectory = "${REGISTRY}"\n[net]\noffline = true\n`;

let built: Promise<string> | undefined;

/** The client binary: the cached one, or built now (then cached). */
export function rustH2Binary(): Promise<string> {
  built ??= (async () => {
    const reason = rustH2Missing();
    if (reason) throw new Error(reason);
    const cacheDir = join(tmpdir(), `certbroker-${NAME}`);
    const tools = toolchain();
    const binary = join(cacheDir, `${NAME}-${buildKey(tools)}`);
    if (existsSync(binary)) return binary;
    await mkdir(cacheDir, { recursive: true });
    const work = await mkdtemp(join(cacheDir, 'build-'));
    try {
      await mkdir(join(work, 'src'));
      await mkdir(join(work, '.cargo'));
      for (const s of SOURCES) copyFileSync(join(CRATE_DIR, s), join(work, s));
      await writeFile(join(work, '.cargo/config.toml'), CARGO_CONFIG);
      const env = cargoEnv(cacheDir, tools);
      try {
        await run(cargo!, ['build', '--release', '--offline', '--quiet'], { cwd: work, env, maxBuffer: 16 << 20 });
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new Error(`building ${NAME} with ${cargo} failed: ${e.stderr || e.message}`);
      }
      const out = join(work, PACKAGE_BIN);
      copyFileSync(join(env.CARGO_TARGET_DIR!, 'release', PACKAGE_BIN), out);
      await rename(out, binary); // atomic: a concurrent build's result is equally good
      return binary;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  })();
  return built;
}

/** One call's outcome as hyper saw it (`grpc_status` null when none arrived). */
export interface RustCall {
  readonly error?: string;
  /** `--cancel-mid` / `--cancel-after`: how the client cancelled the call. */
  readonly cancelled?: 'mid' | 'after';
  readonly http_status: number;
  readonly content_type: string;
  readonly grpc_status: number | null;
  readonly grpc_message: string;
  readonly error_code: string;
  readonly trailers_only: boolean;
  readonly messages: number;
  readonly cert_chain?: string[];
  readonly status?: string;
}

/** A run's result: every call on its one connection, and how the connection ended. */
export interface RustRun {
  readonly alpn: string;
  readonly ok_calls: number;
  readonly calls: RustCall[];
  readonly late_call?: RustCall;
  readonly connection: string;
}

/** Runs one subcommand to its end and returns its JSON line. */
export async function rustH2(args: readonly string[], timeoutMs = 30_000): Promise<RustRun> {
  const bin = await rustH2Binary();
  try {
    const { stdout } = await run(bin, [...args], { timeout: timeoutMs, maxBuffer: 64 << 20 });
    return JSON.parse(stdout.trim().split('\n').pop()!) as RustRun;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${NAME} ${args[0]} failed: ${e.stderr || e.message}`);
  }
}

/** A started `--hold` run: its streams wait, half sent, until `go()`. */
export type HeldRust = HeldClient<RustRun>;

export async function spawnRustH2(args: readonly string[]): Promise<HeldRust> {
  return spawnHeld<RustRun>(NAME, await rustH2Binary(), [...args, '--hold']);
}
