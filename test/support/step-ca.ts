/**
 * A real smallstep step-ca for the step-ca signer's tests. The binary is built from Debian's Go
 * sources (golang-github-smallstep-certificates-dev, 0.19) and test/support/step-ca/main.go in
 * GOPATH mode, offline, once per machine: it is cached in the OS temp directory under a hash of
 * main.go, the package version and the Go version, so a suite builds it once (~25 s) and every
 * later run reuses it. `stepCaMissing()` says why a test must skip (Go, gcc, libzstd or the
 * sources absent); `.ci/run` installs them.
 *
 * `startStepCa(dir, { provisioners })` writes a ca.json into `dir`: the root and intermediate
 * from `certbroker certs` (the CLI, run as a process), JWK provisioners whose keys are made with
 * jose (each with its own X.509 template and claims), no database (step-ca's in-memory one), and
 * listens on 127.0.0.1. It resolves once `/health` answers over TLS verified with the root.
 * `stop()` ends the process (SIGTERM, then SIGKILL); `start()` runs it again on the same port.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { calculateJwkThumbprint, CompactEncrypt, exportJWK, generateKeyPair, type JWK } from 'jose';
import { CLI_MAIN } from './cli-process.js';
import { REPO_ROOT } from './fixtures.js';
import { goMainBinary } from './go-main.js';
import { goMissing } from './tools.js';


const STEP_CA_SOURCES = '/usr/share/gocode/src/github.com/smallstep/certificates';
const STEP_CA_MAIN = join(REPO_ROOT, 'test/support/step-ca/main.go');
const PACKAGE = 'golang-github-smallstep-certificates-dev';
const PACKAGES = `Debian packages golang-go gcc libzstd-dev ${PACKAGE}`;

/**
 * The X.509 template that makes step-ca issue SPIFFE leaves (docs/ca.md): empty subject (so the
 * SAN extension is critical), the token's `sans` (the SPIFFE ID, plus serving names when asked),
 * digitalSignature + keyEncipherment, both TLS usages, CA:false.
 */
const SPIFFE_TEMPLATE = `{
  "subject": {},
  "sans": {{ toJson .SANs }},
  "keyUsage": ["digitalSignature", "keyEncipherment"],
  "extKeyUsage": ["serverAuth", "clientAuth"],
  "basicConstraints": {"isCA": false}
}`;

let missing: string | undefined | null = null;

/** Why step-ca cannot be built here (skip reason), or undefined. */
export function stepCaMissing(): string | undefined {
  if (missing !== null) return missing;
  const go = goMissing();
  if (go) missing = go;
  else if (!existsSync(join(STEP_CA_SOURCES, 'commands/app.go'))) missing = `step-ca's Go sources are not installed (${PACKAGES})`;
  else if (spawnSync('gcc', ['--version'], { stdio: 'ignore' }).status !== 0) missing = `gcc is not installed: step-ca's zstd dependency needs cgo (${PACKAGES})`;
  else if (!existsSync('/usr/include/zstd.h')) missing = `zstd.h is not installed: step-ca's zstd dependency needs it (${PACKAGES})`;
  else missing = undefined;
  return missing;
}

let built: Promise<string> | undefined;

/** The step-ca binary: the cached one, or built now (then cached; test/support/go-main.ts). */
function stepCaBinary(): Promise<string> {
  built ??= (async () => {
    const reason = stepCaMissing();
    if (reason) throw new Error(reason);
    const versions = spawnSync('dpkg-query', ['-W', '-f', '${Version}', PACKAGE], { encoding: 'utf8' }).stdout || readFileSync(join(STEP_CA_SOURCES, 'go.mod'), 'utf8');
    return goMainBinary({ name: 'step-ca', main: STEP_CA_MAIN, versions, cgo: true, keepBuildCache: false });
  })();
  return built;
}

export interface ProvisionerSpec {
  readonly name: string;
  /** X.509 template (default SPIFFE_TEMPLATE). */
  readonly template?: string;
  /** Go duration (default 168h). */
  readonly maxTlsCertDuration?: string;
}

export interface Provisioner {
  readonly name: string;
  readonly kid: string;
  /** The private JWK (with `kid`), as the CA's --provisioner-key-file takes it. */
  readonly privateJwk: JWK;
  readonly keyFile: string;
}

export interface StepCa {
  readonly url: string;
  readonly port: number;
  readonly rootPem: string;
  readonly rootFile: string;
  readonly provisioners: ReadonlyMap<string, Provisioner>;
  /** step-ca's stderr so far (its request log included). */
  readonly output: string[];
  /** Requests to `/1.0/sign` step-ca has logged. */
  signRequests(): number;
  /** The running process's pid (throws when stopped). */
  pid(): number;
  start(): Promise<void>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A fresh ES256 provisioner key: the public JWK for ca.json and the private one for the CA. */
export async function makeProvisionerKey(): Promise<{ kid: string; publicJwk: JWK; privateJwk: JWK }> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk, 'sha256');
  return { kid, publicJwk: { ...publicJwk, kid, alg: 'ES256', use: 'sig' }, privateJwk: { ...(await exportJWK(privateKey)), kid, alg: 'ES256', use: 'sig' } };
}

/** The private JWK encrypted with `password` the way `step crypto jwk create` does (PBES2, 100 000 iterations). */
export async function encryptJwk(jwk: JWK, password: string): Promise<string> {
  return new CompactEncrypt(new TextEncoder().encode(JSON.stringify(jwk)))
    .setProtectedHeader({ alg: 'PBES2-HS256+A128KW', enc: 'A256GCM', cty: 'jwk+json', p2c: 100000 })
    .encrypt(new TextEncoder().encode(password));
}

function healthy(url: string, ca: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(`${url}/health`, { ca, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

export async function startStepCa(dir: string, options: { readonly provisioners: readonly ProvisionerSpec[] }): Promise<StepCa> {
  const binary = await stepCaBinary();
  const pki = join(dir, 'pki');
  execFileSync(process.execPath, [CLI_MAIN, 'certs', '--out', pki, '--root-subject', 'O=step-ca test, CN=Step Root', '--ca-subject', 'O=step-ca test, CN=Step Intermediate'], { stdio: 'ignore' });
  const provisioners = new Map<string, Provisioner>();
  const entries: object[] = [];
  for (const spec of options.provisioners) {
    const key = await makeProvisionerKey();
    const keyFile = join(dir, `${spec.name}.jwk.json`);
    await writeFile(keyFile, JSON.stringify(key.privateJwk), { mode: 0o600 });
    provisioners.set(spec.name, { name: spec.name, kid: key.kid, privateJwk: key.privateJwk, keyFile });
    entries.push({
      type: 'JWK',
      name: spec.name,
      key: key.publicJwk,
      claims: { minTLSCertDuration: '1m', maxTLSCertDuration: spec.maxTlsCertDuration ?? '168h', defaultTLSCertDuration: '24h' },
      options: { x509: { template: spec.template ?? SPIFFE_TEMPLATE } },
    });
  }
  const configFile = join(dir, 'ca.json');
  const rootFile = join(pki, 'root-cert.pem');
  const writeConfig = (port: number) =>
    writeFile(
      configFile,
      JSON.stringify(
        {
          root: rootFile,
          crt: join(pki, 'ca-cert.pem'),
          key: join(pki, 'ca-key.pem'),
          address: `127.0.0.1:${port}`,
          dnsNames: ['127.0.0.1', 'localhost'],
          logger: { format: 'text' },
          authority: { provisioners: entries },
          tls: { minVersion: 1.2, maxVersion: 1.3, renegotiation: false },
        },
        null,
        2,
      ),
    );
  const rootPem = await readFile(rootFile, 'utf8');
  let port = 0;
  let url = '';
  const output: string[] = [];
  let child: ChildProcess | undefined;

  const start = async (): Promise<void> => {
    const proc = spawn(binary, [configFile], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, STEPPATH: join(dir, 'steppath') }, stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    proc.stdout!.setEncoding('utf8').on('data', (c: string) => output.push(c));
    proc.stderr!.setEncoding('utf8').on('data', (c: string) => output.push(c));
    let exited = false;
    proc.once('exit', () => (exited = true));
    for (let i = 0; i < 300; i++) {
      if (exited) throw new Error(`step-ca exited at start:\n${output.join('').slice(-2000)}`);
      if (await healthy(url, rootPem)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`step-ca did not become healthy:\n${output.join('').slice(-2000)}`);
  };
  const stop = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  };
  // The free port is picked before step-ca binds it; a port taken meanwhile is picked again.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    url = `https://127.0.0.1:${port}`;
    await writeConfig(port);
    const seen = output.length;
    try {
      await start();
      break;
    } catch (err) {
      await stop();
      if (attempt >= 3 || !output.slice(seen).join('').includes('address already in use')) throw err;
    }
  }
  return {
    url,
    port,
    rootPem,
    rootFile,
    provisioners,
    output,
    signRequests: () => (output.join('').match(/path=\/1\.0\/sign\b/g) ?? []).length,
    pid: () => {
      if (child?.pid === undefined) throw new Error('step-ca is not running');
      return child.pid;
    },
    start,
    stop,
  };
}
