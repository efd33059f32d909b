/**
 * certbroker's grpc-go interop client (test/interop/grpc-go-client/main.go), built from Debian's
 * grpc-go sources in GOPATH mode, offline, the way step-ca is (test/support/step-ca.ts). The binary
 * is cached in the OS temp directory under a hash of main.go, the grpc-go and protobuf package
 * versions and the Go version (test/support/go-main.ts); Go's build cache for it lives next to it
 * (`<tmp>/certbroker-grpc-go/gocache`) and is kept, so an edited main.go rebuilds in a few seconds.
 * A cold build (nothing cached: the standard library, grpc-go, x/net, protobuf compiled) takes
 * ~15-20 s on 2 cores here.
 *
 * `grpcGoMissing()` says why a test must skip (Go or the sources absent); `.ci/run` installs them.
 * `grpcGo(args)` runs one subcommand and parses the JSON line it prints; `spawnGrpcGo` starts one
 * that waits for a line on stdin before it connects (`-wait-stdin`), so a test can first move it
 * into a pod's cgroup.
 */
import { execFile, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from './fixtures.js';
import { spawnHeld, type HeldClient } from './held-client.js';
import { goMainBinary } from './go-main.js';
import { goMissing } from './tools.js';

const run = promisify(execFile);

const GOCODE = '/usr/share/gocode/src';
const CLIENT_MAIN = join(REPO_ROOT, 'test/interop/grpc-go-client/main.go');
const PACKAGES = ['golang-google-grpc-dev', 'golang-google-protobuf-dev', 'golang-google-genproto-dev', 'golang-golang-x-net-dev'];
const SOURCES = [
  'google.golang.org/grpc/clientconn.go',
  'google.golang.org/protobuf/encoding/protowire/wire.go',
  'google.golang.org/genproto/googleapis/rpc/errdetails/error_details.pb.go',
  'golang.org/x/net/http2/http2.go',
];

let missing: string | undefined | null = null;

/** Why the grpc-go client cannot be built here (skip reason), or undefined. */
export function grpcGoMissing(): string | undefined {
  if (missing !== null) return missing;
  const go = goMissing();
  const absent = SOURCES.filter((s) => !existsSync(join(GOCODE, s)));
  missing = go ?? (absent.length > 0 ? `grpc-go's Go sources are not installed (${absent.join(', ')} missing; Debian packages golang-go ${PACKAGES.join(' ')})` : undefined);
  return missing;
}

let built: Promise<string> | undefined;

/** The client binary: the cached one, or built now (then cached; test/support/go-main.ts). */
export function grpcGoBinary(): Promise<string> {
  built ??= (async () => {
    const reason = grpcGoMissing();
    if (reason) throw new Error(reason);
    const versions = spawnSync('dpkg-query', ['-W', '-f', '${Package} ${Version}\n', ...PACKAGES], { encoding: 'utf8' }).stdout ?? '';
    return goMainBinary({ name: 'grpc-go', main: CLIENT_MAIN, versions, cgo: false, keepBuildCache: true });
  })();
  return built;
}

/** A call's outcome as grpc-go reports it (`code` is grpc-go's codes.Code name: OK, Unauthenticated, ...). */
export interface GoOutcome {
  readonly code: string;
  readonly message?: string;
  readonly error_info?: ReadonlyArray<{ reason: string; domain: string; metadata?: Record<string, string> }>;
  readonly bad_details?: readonly string[];
}

export interface GoSvid {
  readonly spiffe_id: string;
  readonly cert_ders: number;
  readonly leaf_uris: readonly string[] | null;
  readonly key_matches: boolean;
  readonly bundle_certs: number;
  readonly verified: string;
  readonly hint?: string;
  readonly leaf_pem: string;
  readonly not_after: string;
}

export interface GoSvidResponse {
  readonly svids: readonly GoSvid[];
  readonly crl: number;
  readonly federated_bundles: Record<string, number>;
}

export type GoResult = GoOutcome & Record<string, unknown>;

/** Runs one subcommand to its end and returns its JSON line. */
export async function grpcGo<T = GoResult>(args: readonly string[], timeoutMs = 30_000): Promise<T> {
  const bin = await grpcGoBinary();
  try {
    const { stdout } = await run(bin, [...args], { timeout: timeoutMs, maxBuffer: 16 << 20 });
    return JSON.parse(stdout.trim().split('\n').pop()!) as T;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`grpc-go-client ${args[0]} failed: ${e.stderr || e.message}`);
  }
}

/** A started subcommand that connects once `go()` is called (it was given `-wait-stdin`); `result` is typed by the caller. */
export type WaitingGo = HeldClient<unknown>;

export async function spawnGrpcGo(args: readonly string[]): Promise<WaitingGo> {
  return spawnHeld<unknown>('grpc-go-client', await grpcGoBinary(), [...args, '-wait-stdin']);
}
