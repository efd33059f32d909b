/**
 * The Dockerfile's steps, replayed without Docker (test/deploy/dockerfile.ts): the build stage
 * compiles only what it copies (src/, not test/ or bench/), runs copy-assets and packages the CNI
 * binaries; the runtime stage gets exactly what its COPY --from lines name. Then the result is
 * run as the image runs it (ENTRYPOINT + CMD, the packaged binaries, `certbroker ca` with the
 * env of deploy/ca.yaml), and the manifests are checked against the image: the binaries' source
 * directory, and the subcommand every container runs.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { builtinModules } from 'node:module';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { basename, join, posix, relative } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { loadInstallConfig } from '../../src/cni/install/config.js';
import { serviceAccountToken, startCluster, type DevCluster } from '../support/cluster.js';
import { identityObjects, renderDeploy, REPO_ROOT, type K8sObject } from './manifests.js';
import { containerCommand, hostPath, parseDockerfile, replayDockerfile, type ReplayedImage } from './dockerfile.js';
import { jsImports, packageOf } from './js-imports.js';
import { kubectlMissing } from '../support/tools.js';
import { tempDirSync } from '../support/scratch.js';

const skip = process.platform === 'linux' ? false : `the image is linux; the packaged binaries cannot be built for it on ${process.platform}`;
if (skip) process.stdout.write(`# skipped: ${skip}\n`);

let dir: string;
let image: ReplayedImage;
let cluster: DevCluster | undefined;

before(async () => {
  if (skip) return;
  dir = tempDirSync('dockerfile-');
  const started = Date.now();
  image = await replayDockerfile({ repoRoot: REPO_ROOT, dockerfile: join(REPO_ROOT, 'Dockerfile'), dir });
  process.stdout.write(`# replayed the Dockerfile in ${Date.now() - started} ms\n`);
});

after(async () => {
  try {
    await cluster?.close();
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});

function exec(c: { file: string; args: string[]; cwd: string; env: Record<string, string> }): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(c.file, c.args, { cwd: c.cwd, env: c.env, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** The image's default command: ENTRYPOINT followed by CMD. */
function imageArgv(extra?: readonly string[]): string[] {
  const { entrypoint, cmd } = image.final;
  assert.ok(entrypoint, 'the final stage has an ENTRYPOINT');
  return [...entrypoint, ...(extra ?? cmd ?? [])];
}

/** Subcommand names from commander's help ("Commands:" then two-space-indented names). */
function subcommandsOf(help: string): Set<string> {
  const section = help.split(/^Commands:$/m)[1] ?? '';
  return new Set([...section.matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1]!).filter((n) => n !== 'help'));
}

let helpText: Promise<string> | undefined;
function imageHelp(): Promise<string> {
  helpText ??= exec(containerCommand(image.final, imageArgv())).then((r) => {
    assert.equal(r.code, 0, `ENTRYPOINT + CMD exits 0:\n${r.stderr}`);
    return r.stdout;
  });
  return helpText;
}

/** Where the final stage's COPY put the packaged CNI binaries: container dir and file names. */
function binariesCopy(): { dir: string; names: string[] } {
  const c = image.copies.find((x) => x.stage === image.final && x.sources.some((s) => basename(s) === 'istio-cni'));
  assert.ok(c, 'the final stage copies istio-cni');
  return { dir: c.dest.replace(/\/$/, ''), names: c.sources.map((s) => basename(s)) };
}

test('the parser refuses what it does not understand, with the line', { skip }, () => {
  assert.throws(() => parseDockerfile('FROM node:20\nUSER 1337\n'), /line 2: instruction USER is not understood/);
  assert.throws(() => parseDockerfile('FROM node:20\nCOPY --chown=1337 src ./src\n'), /line 2: COPY --chown=1337 is not understood/);
  assert.throws(() => parseDockerfile('FROM node:20\nCMD node main.js\n'), /line 2: CMD in shell form/);
  const ins = parseDockerfile('ARG IMG=node:20\nFROM ${IMG} AS b\nRUN a \\\n  # note\n  && b\n');
  assert.deepEqual(ins[1], { kind: 'FROM', line: 2, image: 'node:20', as: 'b' });
  assert.deepEqual(ins[2], { kind: 'RUN', line: 3, command: 'a && b' });
});

test('two stages, the runtime one built FROM the same node image as the build', { skip }, (t) => {
  assert.equal(image.stages.length, 2);
  assert.equal(image.stages[0]!.image, image.final.image);
  const major = /^node:(\d+)/.exec(image.final.image)?.[1];
  assert.ok(major, `base image ${image.final.image} is a node image`);
  const host = process.versions.node.split('.')[0];
  // The host's node stands in for the image's: say so when they differ, as the replay is then less faithful.
  if (major !== host) t.diagnostic(`the image has node ${major}, this replay ran on node ${host}`);
});

test('ENTRYPOINT + CMD (`--help`) runs from the runtime layout and lists ca, broker, install-cni', { skip }, async () => {
  const names = subcommandsOf(await imageHelp());
  for (const n of ['ca', 'broker', 'install-cni']) assert.ok(names.has(n), `${n} in ${[...names].join(', ')}`);
});

test('the packaged istio-cni answers VERSION and istio-iptables --help exits 0', { skip }, async () => {
  const { dir: binDir } = binariesCopy();
  const base = containerCommand(image.final, [posix.join(binDir, 'istio-cni')]);
  const v = await exec({ ...base, env: { ...base.env, CNI_COMMAND: 'VERSION' } });
  assert.equal(v.code, 0, v.stderr);
  assert.ok((JSON.parse(v.stdout) as { supportedVersions: string[] }).supportedVersions.includes('1.1.0'), v.stdout);
  const ipt = await exec(containerCommand(image.final, [posix.join(binDir, 'istio-iptables'), '--help']));
  assert.equal(ipt.code, 0, ipt.stderr);
  assert.match(ipt.stdout, /Usage: istio-iptables/);
});

/**
 * Runtime files that import a computed specifier, which the check below cannot read: each with why
 * it is safe. cli/main.js imports its subcommand modules from a list of relative paths (the
 * `--help` test above runs every one of them from the runtime layout).
 */
const COMPUTED_IMPORTS: Readonly<Record<string, string>> = {
  'cli/main.js': 'SUBCOMMANDS: relative ./<name>.js paths',
  'ca/signers/module-loader.js': '--signer module:<path-or-package>: the operator names the module (a file or a package they install in the image); it is not one of ours',
};

test('the import reader sees imports in the syntax tree, not import-like text', { skip }, () => {
  const d = join(dir, 'imports-probe');
  mkdirSync(join(d, 'sub'), { recursive: true });
  writeFileSync(
    join(d, 'a.js'),
    [
      `import { x } from 'left-pad';`,
      `import 'side-effect';`,
      `export * from '@scope/pkg/deep/path.js';`,
      `import * as fs from "node:fs";`,
      `const m = await import('dyn-pkg');`,
      `const require = (await import('node:module')).createRequire(import.meta.url);`,
      `require('req-pkg');`,
      `const where = './sub/b.js';`,
      `await import(where);`,
      // Text that a pattern took for imports:
      `throw new Error('a JSON patch "from" must be a string');`,
      `const s = "import('not-a-module')"; // require('nor-this')`,
      `/* import x from 'commented-out' */`,
    ].join('\n'),
  );
  writeFileSync(join(d, 'sub', 'b.js'), `export { y } from '../a.js';\n`);
  const sites = jsImports(d).map((s) => `${relative(d, s.file)}:${s.line} ${s.specifier ?? '<computed>'}`);
  assert.deepEqual(sites.sort(), [
    'a.js:1 left-pad',
    'a.js:2 side-effect',
    'a.js:3 @scope/pkg/deep/path.js',
    'a.js:4 node:fs',
    'a.js:5 dyn-pkg',
    'a.js:6 node:module',
    'a.js:7 req-pkg',
    'a.js:9 <computed>',
    'sub/b.js:1 ../a.js',
  ].sort());
  assert.equal(packageOf('@scope/pkg/deep/path.js'), '@scope/pkg');
  assert.equal(packageOf('protobufjs/ext/descriptor'), 'protobufjs');
  assert.equal(packageOf('../a.js'), undefined);
  assert.equal(packageOf('node:fs'), undefined);
});

test('runtime code imports only `dependencies` (what npm prune --omit=dev keeps)', { skip }, () => {
  // npm prune runs in the build stage, against its package.json.
  const pkg = JSON.parse(readFileSync(hostPath(image.stages[0]!, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  const allowed = new Set([...Object.keys(pkg.dependencies ?? {}), ...builtinModules]);
  const distSrc = hostPath(image.final, 'dist/src');
  const sites = jsImports(distSrc);
  assert.ok(new Set(sites.map((s) => s.file)).size > 100, `read the imports of ${sites.length} sites`);
  const offenders: string[] = [];
  for (const { file, line, specifier } of sites) {
    const where = `dist/src/${relative(distSrc, file)}:${line}`;
    if (specifier === undefined) {
      if (COMPUTED_IMPORTS[relative(distSrc, file)] === undefined) offenders.push(`${where}: a computed import (list it in COMPUTED_IMPORTS with why it is safe)`);
      continue;
    }
    const name = packageOf(specifier);
    if (name !== undefined && !allowed.has(name)) offenders.push(`${where}: ${specifier}`);
  }
  assert.deepEqual(offenders, []);
});

interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath?: string } } }[];
}

/** The env of a rendered container: plain values, and the pod fields a kubelet fills in (as node-a). */
function containerEnv(o: K8sObject, container: Container): Record<string, string> {
  const podFields: Record<string, string> = {
    'metadata.namespace': o.metadata.namespace ?? 'default',
    'metadata.name': `${o.metadata.name}-abcde`,
    'spec.nodeName': 'node-a',
  };
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) {
    const field = e.valueFrom?.fieldRef?.fieldPath;
    if (e.value !== undefined) env[e.name] = e.value;
    else if (field !== undefined && podFields[field] !== undefined) env[e.name] = podFields[field];
  }
  return env;
}

function podContainers(o: K8sObject): Container[] {
  type PodSpec = { containers?: Container[]; initContainers?: Container[] };
  const spec = o.spec as { template?: { spec?: PodSpec }; jobTemplate?: { spec?: { template?: { spec?: PodSpec } } } } | undefined;
  const pod = spec?.template?.spec ?? spec?.jobTemplate?.spec?.template?.spec;
  return [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])];
}

function readyz(port: number): Promise<number> {
  return new Promise((resolve) => {
    request({ host: '127.0.0.1', port, path: '/readyz' }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on('error', () => resolve(0))
      .end();
  });
}

test('`certbroker ca` starts from the runtime layout with deploy/ca.yaml env and becomes ready', { skip: skip || kubectlMissing() }, async () => {
  cluster = await startCluster();
  await cluster.apply(await identityObjects());
  const deployment = (await renderDeploy()).find((o) => o.kind === 'Deployment' && podContainers(o).some((c) => c.args?.[0] === 'ca'));
  assert.ok(deployment, 'deploy/ has a Deployment running `ca`');
  const container = podContainers(deployment).find((c) => c.args?.[0] === 'ca')!;
  const token = await serviceAccountToken(cluster, { namespace: deployment.metadata.namespace!, serviceAccountName: (deployment.spec as { template: { spec: { serviceAccountName: string } } }).template.spec.serviceAccountName });
  const kubeconfig = join(dir, 'ca-kubeconfig');
  writeFileSync(kubeconfig, cluster.kubeconfigYaml({ token }), { mode: 0o600 });
  const cmd = containerCommand(image.final, imageArgv(container.args));
  const child = spawn(cmd.file, cmd.args, {
    cwd: cmd.cwd,
    // The manifest's env, except: loopback ports, a self-signed root (no cacerts Secret mounted
    // here) and the kubeconfig in place of the in-cluster service account.
    env: { ...cmd.env, ...containerEnv(deployment, container), CA_GRPC_ADDRESS: '127.0.0.1:0', CA_OPS_ADDRESS: '127.0.0.1:0', CA_SIGNER: 'self-signed', KUBECONFIG: kubeconfig, LOG_LEVEL: 'info', CA_SHUTDOWN_GRACE_SECONDS: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
    const lines = stderr.split('\n');
    stderr = lines.pop()!;
    for (const l of lines) {
      try {
        logs.push(JSON.parse(l) as Record<string, unknown>);
      } catch {
        logs.push({ msg: l });
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stopped: number | null | 'still running' = null;
  try {
    let opsPort = 0;
    let listening = false;
    let ready = 0;
    // Stop early on the CLI's fatal error line: a CA whose start failed can stay up after it.
    const failed = () => logs.some((r) => typeof r.msg === 'string' && r.msg.startsWith('certbroker: '));
    for (let i = 0; i < 300 && ready !== 200 && child.exitCode === null && !failed(); i++) {
      await delay(50);
      listening ||= logs.some((r) => r.msg === 'CA listening');
      opsPort ||= Number(logs.find((r) => r.msg === 'ops endpoint listening')?.port ?? 0);
      if (listening && opsPort) ready = await readyz(opsPort);
    }
    const seen = logs.map((r) => JSON.stringify(r)).join('\n');
    assert.ok(listening, `CA listening:\n${seen}`);
    assert.equal(ready, 200, `/readyz:\n${seen}`);
  } finally {
    child.kill('SIGTERM');
    // Bounded, so a CA that ignores SIGTERM fails the test instead of hanging the run.
    const bound = new AbortController();
    stopped = await Promise.race([exited, delay(15_000, 'still running' as const, { signal: bound.signal })]);
    bound.abort();
    if (stopped === 'still running') child.kill('SIGKILL');
  }
  assert.equal(stopped, 0, `exits 0 on SIGTERM:\n${logs.map((r) => JSON.stringify(r)).join('\n')}\n${stderr}`);
});

test('install-cni copies the binaries from where the image puts them', { skip: skip || kubectlMissing() }, async () => {
  const { dir: binDir, names } = binariesCopy();
  const defaults = loadInstallConfig({ KUBERNETES_SERVICE_HOST: '10.0.0.1', NODE_NAME: 'node-a' });
  assert.equal(defaults.binariesSourceDir, binDir, 'src/cni/install/config.ts default CNI_BINARIES_SOURCE_DIR');
  const ds = (await renderDeploy()).find((o) => podContainers(o).some((c) => c.args?.[0] === 'install-cni'));
  assert.ok(ds, 'deploy/ runs install-cni');
  const container = podContainers(ds).find((c) => c.args?.[0] === 'install-cni')!;
  const config = loadInstallConfig({ KUBERNETES_SERVICE_HOST: '10.0.0.1', ...containerEnv(ds, container) });
  assert.equal(config.binariesSourceDir, binDir, `${ds.kind} ${ds.metadata.name} CNI_BINARIES_SOURCE_DIR`);
  assert.deepEqual([...config.binaries].sort(), [...names].sort(), 'CNI_BINARIES are the binaries the image carries');
});

test('every container in deploy/ runs the image entrypoint with a subcommand the CLI has', { skip: skip || kubectlMissing() }, async () => {
  const subcommands = subcommandsOf(await imageHelp());
  const workloads = (await renderDeploy()).filter((o) => podContainers(o).length > 0);
  assert.ok(workloads.length >= 3, 'the CA, the node broker and istio-cni');
  for (const o of workloads) {
    for (const c of podContainers(o)) {
      const where = `${o.kind} ${o.metadata.name} container ${c.name}`;
      assert.match(c.image ?? '', /^certbroker(:|@|$)/, `${where} runs the certbroker image`);
      assert.equal(c.command, undefined, `${where} keeps the image ENTRYPOINT`);
      assert.ok(c.args?.[0] !== undefined && subcommands.has(c.args[0]), `${where}: args[0] ${c.args?.[0]} is one of ${[...subcommands].join(', ')}`);
    }
  }
});
