/**
 * The optional host tools some tests drive (openssl, kubectl, Python grpcio/grpc_tools, Go). Each
 * probe runs the tool once per process and answers with the reason a test must skip, naming what
 * to install, or undefined when the tool works. Use it as `test(name, { skip: opensslMissing() }, ...)`:
 * node's runner prints the reason next to the skipped test.
 *
 * The network-namespace probes live beside their fixtures (test/cni/iptables/netns.ts,
 * test/cni/e2e/fixture.ts); they need root as well as iptables, iproute2 and the CNI plugins.
 *
 * `CERTBROKER_TEST_PYTHON` names the Python the grpcio tests run (default Debian's /usr/bin/python3,
 * where python3-grpcio and python3-grpc-tools install; a pyenv python3 first on PATH has neither).
 */
import { execFile, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';

export const TEST_PYTHON = process.env.CERTBROKER_TEST_PYTHON || '/usr/bin/python3';

const cache = new Map<string, string | undefined>();

function once(key: string, probe: () => string | undefined): string | undefined {
  if (!cache.has(key)) cache.set(key, probe());
  return cache.get(key);
}

function firstLine(text: string | null | undefined): string {
  return (text ?? '').trim().split('\n').at(-1) ?? '';
}

/**
 * Why `command args` cannot serve a test (not installed, or it fails), or undefined when it exits 0.
 * `install` says what provides the command (a Debian package name, or a hint).
 */
export function commandProblem(command: string, args: readonly string[], install: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const r = spawnSync(command, [...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000, env });
  const err = r.error as NodeJS.ErrnoException | undefined;
  if (err?.code === 'ENOENT') return `${command} is not installed (${install})`;
  if (err) return `\`${[command, ...args].join(' ')}\` failed: ${err.message} (${install})`;
  if (r.status !== 0) return `\`${[command, ...args].join(' ')}\` exited with ${String(r.status ?? r.signal)}: ${firstLine(r.stderr)} (${install})`;
  return undefined;
}

/** openssl, the independent check of keys, CSRs and chains. */
export function opensslMissing(): string | undefined {
  return once('openssl', () => commandProblem('openssl', ['version'], 'Debian package openssl'));
}

/** kubectl (with its built-in kustomize), for the kubectl-driven devcluster and deploy tests. */
export function kubectlMissing(): string | undefined {
  return once('kubectl', () => commandProblem('kubectl', ['version', '--client'], 'Debian package kubernetes-client, or any kubectl >= 1.27 on PATH'));
}

const GO_INSTALL = 'Debian package golang-go: apt-get install golang-go';
const H2LOAD_INSTALL = 'Debian package nghttp2-client: apt-get install nghttp2-client';

/** A Go toolchain, for the crypto/x509 reference encoder. */
export function goMissing(): string | undefined {
  return once('go', () => commandProblem('go', ['version'], GO_INSTALL));
}

/** nghttp2's h2load, the CA benchmark's load generator. */
export function h2loadMissing(): string | undefined {
  return once('h2load', () => commandProblem('h2load', ['--version'], H2LOAD_INSTALL));
}

/**
 * What `npm run bench` cannot measure on this host and how to get it (it installs nothing): one
 * line per missing tool (go: bench:pki's Go crypto/x509 rows; h2load: bench:ca's h2load rows),
 * then the one command installing all of them. Empty when both are there. Probes `env`'s PATH.
 */
export function benchToolHints(env: NodeJS.ProcessEnv = process.env): string[] {
  const tools = [
    { pkg: 'golang-go', problem: commandProblem('go', ['version'], GO_INSTALL, env), skips: "bench:pki skips its Go crypto/x509 rows (the issue's reference)" },
    { pkg: 'nghttp2-client', problem: commandProblem('h2load', ['--version'], H2LOAD_INSTALL, env), skips: 'bench:ca uses its node:http2 load client and skips the h2load rows' },
  ].filter((t) => t.problem !== undefined);
  if (tools.length === 0) return [];
  return [...tools.map((t) => `${t.problem}: ${t.skips}`), `to measure everything: apt-get install ${tools.map((t) => t.pkg).join(' ')}`];
}

const GRPC_PACKAGES = 'Debian packages python3-grpcio python3-grpc-tools';
/** Prints where grpc_tools keeps the well-known protos (google/protobuf/*.proto). */
const GRPC_PROBE = "import os, grpc, grpc_tools.protoc; print(os.path.join(os.path.dirname(grpc_tools.__file__), '_proto'))";
let protoInclude: string | undefined;

/** Python with grpcio and grpc_tools (protoc), for the interop and reflection tests. */
export function pythonGrpcMissing(): string | undefined {
  return once('python-grpc', () => {
    if (!existsSync(TEST_PYTHON)) return `${TEST_PYTHON} is not installed (Debian package python3; ${GRPC_PACKAGES})`;
    const r = spawnSync(TEST_PYTHON, ['-c', GRPC_PROBE], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
    if (r.error) return `${TEST_PYTHON} does not run: ${r.error.message}`;
    if (r.status !== 0) return `${TEST_PYTHON} cannot import grpc and grpc_tools (${firstLine(r.stderr)}): install ${GRPC_PACKAGES}`;
    const dir = r.stdout.trim();
    if (!existsSync(dir)) return `grpc_tools has no well-known protos at ${dir} (${GRPC_PACKAGES})`;
    protoInclude = dir;
    return undefined;
  });
}

/** The include directory of grpc_tools' well-known protos; only after pythonGrpcMissing() said undefined. */
export function grpcToolsProtoInclude(): string {
  if (pythonGrpcMissing() !== undefined || protoInclude === undefined) throw new Error(`grpc_tools is unavailable: ${pythonGrpcMissing()}`);
  return protoInclude;
}

/** Python message and gRPC stubs of `protos` (paths under `root`) written into `dir` by grpc_tools.protoc; only after pythonGrpcMissing() said undefined. */
export async function writePythonGrpcStubs(root: string, dir: string, protos: readonly string[]): Promise<void> {
  await promisify(execFile)(TEST_PYTHON, ['-m', 'grpc_tools.protoc', '-I', root, '-I', grpcToolsProtoInclude(), '--python_out', dir, '--grpc_python_out', dir, ...protos]);
}
