/**
 * The Dockerfile, replayed without Docker: each stage gets its own directory standing in for its
 * filesystem root (`<dir>/build/src` is the build stage's `/src`), COPY copies exactly what it
 * names, RUN runs its commands with `sh -c` in the stage's WORKDIR with absolute paths mapped into
 * the stage's directory. The host's node stands in for the base image's.
 *
 * Only the instructions our Dockerfile uses are understood; anything else is refused with the line
 * number, so a new instruction makes the test be taught what it does instead of being ignored.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, statSync, symlinkSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, posix, relative } from 'node:path';

export type Instruction =
  | { readonly kind: 'ARG'; readonly line: number; readonly name: string; readonly value: string | undefined }
  | { readonly kind: 'FROM'; readonly line: number; readonly image: string; readonly as: string | undefined }
  | { readonly kind: 'WORKDIR'; readonly line: number; readonly path: string }
  | { readonly kind: 'COPY'; readonly line: number; readonly from: string | undefined; readonly sources: readonly string[]; readonly dest: string }
  | { readonly kind: 'RUN'; readonly line: number; readonly command: string }
  | { readonly kind: 'ENV'; readonly line: number; readonly vars: Readonly<Record<string, string>> }
  | { readonly kind: 'ENTRYPOINT' | 'CMD'; readonly line: number; readonly argv: readonly string[] };

function refuse(line: number, what: string): never {
  throw new Error(`Dockerfile line ${line}: ${what} is not understood by test/deploy/dockerfile.ts; teach it what that does`);
}

/** Logical lines: comments dropped, `\` continuations joined; each with its first physical line number. */
function logicalLines(text: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let pending: { line: number; text: string } | undefined;
  text.split('\n').forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed.startsWith('#') || (trimmed === '' && pending === undefined)) return;
    const continued = trimmed.endsWith('\\');
    const part = continued ? trimmed.slice(0, -1).trim() : trimmed;
    pending = pending === undefined ? { line: i + 1, text: part } : { line: pending.line, text: `${pending.text} ${part}` };
    if (!continued) {
      out.push(pending);
      pending = undefined;
    }
  });
  if (pending !== undefined) refuse(pending.line, 'a `\\` continuation at the end of the file');
  return out;
}

function jsonArgv(line: number, keyword: string, rest: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(rest);
  } catch {
    refuse(line, `${keyword} in shell form`);
  }
  if (!Array.isArray(parsed) || parsed.length === 0 || !parsed.every((a) => typeof a === 'string')) refuse(line, `${keyword} ${rest}`);
  return parsed as string[];
}

function noVariables(line: number, keyword: string, rest: string): void {
  if (rest.includes('$')) refuse(line, `variable substitution in ${keyword}`);
}

function parseEnv(line: number, rest: string): Record<string, string> {
  const vars: Record<string, string> = {};
  const pairs = rest.split(/\s+/);
  if (!pairs.every((p) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(p))) refuse(line, `ENV ${rest} (only KEY=value pairs without spaces)`);
  for (const p of pairs) {
    const eq = p.indexOf('=');
    const value = p.slice(eq + 1);
    if (/["'$\\]/.test(value)) refuse(line, `quoting or substitution in ENV ${p}`);
    vars[p.slice(0, eq)] = value;
  }
  return vars;
}

export function parseDockerfile(text: string): Instruction[] {
  const globalArgs = new Map<string, string>();
  let sawFrom = false;
  return logicalLines(text).map(({ line, text: l }): Instruction => {
    const m = /^(\S+)\s*(.*)$/.exec(l)!;
    const keyword = m[1]!.toUpperCase();
    const rest = m[2]!;
    switch (keyword) {
      case 'ARG': {
        const a = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?$/.exec(rest);
        if (a === null) refuse(line, `ARG ${rest}`);
        if (!sawFrom && a[2] !== undefined) globalArgs.set(a[1]!, a[2]);
        return { kind: 'ARG', line, name: a[1]!, value: a[2] };
      }
      case 'FROM': {
        const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest);
        if (f === null) refuse(line, `FROM ${rest}`);
        // Only ARGs declared before the first FROM reach FROM lines, as in Docker.
        const image = f[1]!.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string | undefined, b: string | undefined) => {
          const v = globalArgs.get((a ?? b)!);
          if (v === undefined) refuse(line, `FROM with undefined ARG ${a ?? b}`);
          return v;
        });
        sawFrom = true;
        return { kind: 'FROM', line, image, as: f[2] };
      }
      case 'WORKDIR':
        noVariables(line, keyword, rest);
        return { kind: 'WORKDIR', line, path: rest };
      case 'COPY': {
        noVariables(line, keyword, rest);
        if (rest.startsWith('[')) refuse(line, 'COPY in JSON form');
        const words = rest.split(/\s+/);
        let from: string | undefined;
        while (words[0]?.startsWith('--')) {
          const flag = words.shift()!;
          const fm = /^--from=(\S+)$/.exec(flag);
          if (fm === null) refuse(line, `COPY ${flag}`);
          from = fm[1];
        }
        if (words.length < 2) refuse(line, `COPY ${rest}`);
        if (words.some((w) => /[*?[]/.test(w))) refuse(line, 'wildcards in COPY');
        return { kind: 'COPY', line, from, sources: words.slice(0, -1), dest: words.at(-1)! };
      }
      case 'RUN':
        if (rest.startsWith('[') || rest.startsWith('--')) refuse(line, 'RUN in exec form or with flags');
        return { kind: 'RUN', line, command: rest };
      case 'ENV':
        return { kind: 'ENV', line, vars: parseEnv(line, rest) };
      case 'ENTRYPOINT':
      case 'CMD':
        return { kind: keyword, line, argv: jsonArgv(line, keyword, rest) };
      default:
        refuse(line, `instruction ${keyword}`);
    }
  });
}

export interface Stage {
  readonly index: number;
  readonly name: string | undefined;
  readonly image: string;
  /** The host directory standing in for this stage's `/`. */
  readonly root: string;
  workdir: string;
  readonly env: Record<string, string>;
  entrypoint: readonly string[] | undefined;
  cmd: readonly string[] | undefined;
}

export interface CopyRecord {
  readonly line: number;
  readonly stage: Stage;
  /** The stage copied from, or undefined for the build context. */
  readonly from: Stage | undefined;
  readonly sources: readonly string[];
  /** The destination as a container path (WORKDIR applied). */
  readonly dest: string;
}

export interface ReplayedImage {
  readonly stages: readonly Stage[];
  readonly final: Stage;
  readonly copies: readonly CopyRecord[];
}

/** A container path of `stage` on the host. */
export function hostPath(stage: Stage, containerPath: string): string {
  return join(stage.root, posix.resolve(stage.workdir, containerPath));
}

/**
 * Absolute paths in `text` whose first component exists in the stage (`/src/build/bin` when the
 * stage has a `/src`) become host paths; others (`/dev/null`) stay as they are.
 */
export function mapContainerPaths(stage: Stage, text: string): string {
  return text.replace(/(^|[\s=:'"])(\/[^\s'";|&)]*)/g, (whole, lead: string, path: string) => {
    const first = path.split('/')[1];
    return first && existsSync(join(stage.root, first)) ? `${lead}${join(stage.root, path)}` : whole;
  });
}

function copyOne(from: string, to: string): void {
  mkdirSync(dirname(to), { recursive: true });
  // A symlink we placed (node_modules) is recreated, not followed: see the npm ci note below.
  if (lstatSync(from).isSymbolicLink()) symlinkSync(readlinkSync(from), to);
  else cpSync(from, to, { recursive: true });
}

function applyCopy(stage: Stage, c: Extract<Instruction, { kind: 'COPY' }>, context: { root: string; from: Stage | undefined }): string {
  const dest = posix.resolve(stage.workdir, c.dest) + (c.dest.endsWith('/') ? '/' : '');
  const destIsDir = dest.endsWith('/');
  if (c.sources.length > 1 && !destIsDir) throw new Error(`Dockerfile line ${c.line}: COPY with several sources needs a destination ending in /`);
  const hostDest = join(stage.root, dest);
  for (const src of c.sources) {
    const from = context.from === undefined ? join(context.root, src) : hostPath(context.from, src);
    if (context.from === undefined && relative(context.root, from).startsWith('..')) throw new Error(`Dockerfile line ${c.line}: ${src} is outside the build context`);
    if (!existsSync(from)) throw new Error(`Dockerfile line ${c.line}: COPY source ${src} does not exist${context.from ? ` in stage ${context.from.name ?? context.from.index}` : ' in the build context'}`);
    const isDir = !lstatSync(from).isSymbolicLink() && statSync(from).isDirectory();
    // Docker copies a directory's contents into the destination, and a file into a
    // destination ending in / (or an existing directory) under its own name.
    const target = isDir || !(destIsDir || (existsSync(hostDest) && statSync(hostDest).isDirectory())) ? hostDest : join(hostDest, basename(src));
    if (isDir) mkdirSync(target, { recursive: true });
    copyOne(from, target);
  }
  return dest;
}

function run(cmd: string, options: { cwd: string; env: Record<string, string> }): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('sh', ['-c', cmd], { ...options, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`\`${cmd}\` failed (${err.message.split('\n')[0]}):\n${stdout}\n${stderr}`));
      else resolve();
    });
  });
}

/**
 * npm ci fails unless package-lock.json sits beside package.json and both declare the same
 * dependencies: checked here, since the replay links node_modules instead of running it.
 */
function checkLockInSync(dir: string, line: number): void {
  const pkgFile = join(dir, 'package.json');
  const lockFile = join(dir, 'package-lock.json');
  if (!existsSync(pkgFile) || !existsSync(lockFile)) throw new Error(`Dockerfile line ${line}: npm ci needs package.json and package-lock.json in ${dir}`);
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as Record<string, unknown>;
  const root = (JSON.parse(readFileSync(lockFile, 'utf8')) as { packages?: Record<string, Record<string, unknown>> }).packages?.[''] ?? {};
  for (const field of ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies']) {
    if (JSON.stringify(pkg[field] ?? {}) !== JSON.stringify(root[field] ?? {})) {
      throw new Error(`Dockerfile line ${line}: npm ci would fail: package.json ${field} differ from package-lock.json`);
    }
  }
}

async function applyRun(stage: Stage, c: Extract<Instruction, { kind: 'RUN' }>, repoRoot: string): Promise<void> {
  const cwd = hostPath(stage, stage.workdir);
  for (const segment of c.command.split('&&').map((s) => s.trim())) {
    // The repo's node_modules stands in for `npm ci`: the lock file pins the same tree, and
    // installing here would need the registry and take far longer than the test may. `npm prune`
    // is skipped because it would delete the dev dependencies from the repo's own node_modules
    // through that link; the test checks instead that the runtime code imports only
    // `dependencies`. Neither command may ever run against the linked directory.
    if (/^npm\s+ci(\s|$)/.test(segment)) {
      checkLockInSync(cwd, c.line);
      symlinkSync(join(repoRoot, 'node_modules'), join(cwd, 'node_modules'));
      continue;
    }
    if (/^npm\s+prune(\s|$)/.test(segment)) continue;
    if (/\bnpm\s+(ci|prune|install|i|uninstall|update)\b/.test(segment)) refuse(c.line, `an npm command inside \`${segment}\``);
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'NODE_TEST_CONTEXT') env[k] = v;
    await run(mapContainerPaths(stage, segment), { cwd, env: { ...env, ...stage.env } });
  }
}

export async function replayDockerfile(options: { repoRoot: string; dockerfile: string; dir: string }): Promise<ReplayedImage> {
  if (existsSync(join(options.repoRoot, '.dockerignore'))) throw new Error('.dockerignore is not understood by test/deploy/dockerfile.ts; teach it');
  const stages: Stage[] = [];
  const copies: CopyRecord[] = [];
  let stage: Stage | undefined;
  for (const ins of parseDockerfile(readFileSync(options.dockerfile, 'utf8'))) {
    if (ins.kind === 'FROM') {
      const index = stages.length;
      stage = { index, name: ins.as, image: ins.image, root: join(options.dir, ins.as ?? `stage-${index}`), workdir: '/', env: {}, entrypoint: undefined, cmd: undefined };
      mkdirSync(stage.root, { recursive: true });
      stages.push(stage);
      continue;
    }
    if (stage === undefined) {
      if (ins.kind === 'ARG') continue;
      throw new Error(`Dockerfile line ${ins.line}: ${ins.kind} before FROM`);
    }
    switch (ins.kind) {
      case 'ARG':
        if (ins.value !== undefined) stage.env[ins.name] = ins.value;
        break;
      case 'WORKDIR':
        stage.workdir = posix.resolve(stage.workdir, ins.path);
        mkdirSync(hostPath(stage, stage.workdir), { recursive: true });
        break;
      case 'COPY': {
        const from = ins.from === undefined ? undefined : stages.find((s) => s.name === ins.from || String(s.index) === ins.from);
        if (ins.from !== undefined && (from === undefined || from === stage)) throw new Error(`Dockerfile line ${ins.line}: no earlier stage ${ins.from}`);
        const dest = applyCopy(stage, ins, { root: options.repoRoot, from });
        copies.push({ line: ins.line, stage, from, sources: ins.sources, dest });
        break;
      }
      case 'RUN':
        await applyRun(stage, ins, options.repoRoot);
        break;
      case 'ENV':
        Object.assign(stage.env, ins.vars);
        break;
      case 'ENTRYPOINT':
        stage.entrypoint = ins.argv;
        break;
      case 'CMD':
        stage.cmd = ins.argv;
        break;
    }
  }
  if (stage === undefined) throw new Error('Dockerfile has no FROM');
  return { stages, final: stage, copies };
}

/** The host command that runs `argv` as the final stage's container would (`node` is the host's node). */
export function containerCommand(stage: Stage, argv: readonly string[]): { file: string; args: string[]; cwd: string; env: Record<string, string> } {
  const [exe, ...args] = argv;
  if (exe === undefined) throw new Error('empty container command');
  let file: string;
  if (exe === 'node') file = process.execPath;
  else if (isAbsolute(exe)) file = mapContainerPaths(stage, exe);
  else throw new Error(`the image's ${exe} has no stand-in on this host`);
  return {
    file,
    args: args.map((a) => mapContainerPaths(stage, a)),
    cwd: hostPath(stage, stage.workdir),
    env: { PATH: `${dirname(process.execPath)}:/usr/sbin:/usr/bin:/sbin:/bin`, HOME: stage.root, ...stage.env },
  };
}
