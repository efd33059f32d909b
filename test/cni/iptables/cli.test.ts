/**
 * The istio-iptables executable (dist/src/cni/iptables/main.js) run as a process: dry-run
 * output against Istio's goldens, Istio's env vars, bad flags (exit 2, no stack trace), the
 * `certbroker istio-iptables` route, and real runs in network namespaces: apply + cleanup,
 * outbound traffic landing on the proxy port, `--run-validation` passing as the proxy UID and
 * failing with 126 when the rules are missing.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';
import { ISTIO_IPTABLES_FIXTURES } from '../../support/fixtures.js';
import { createNetns, linkPair, netnsUnavailable, ruleLines, type TestNetns } from './netns.js';
import { Scratch, tempDirSync } from '../../support/scratch.js';
import { seaBundleDefinition } from '../../support/sea-binary.js';
import { build } from 'esbuild';

const here = fileURLToPath(new URL('.', import.meta.url));
const repoRoot = resolve(here, '../../../..');
const MAIN = join(repoRoot, 'dist/src/cni/iptables/main.js');
const CLI_MODULE = join(repoRoot, 'dist/src/cli/iptables.js');
const GOLDEN = join(ISTIO_IPTABLES_FIXTURES, 'golden');

const tmp = tempDirSync('cb-ipt-cli-');
const spaces: TestNetns[] = [];
after(() => {
  spaces.forEach((n) => n.remove());
  rmSync(tmp, { recursive: true, force: true });
});

/** A clean environment: none of Istio's variables leak in from the test runner. */
const BASE_ENV = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };

function run(args: readonly string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', env: { ...BASE_ENV, ...env } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The iptables-restore part of an IPv4-only golden: between the two state checks and the final save. */
function goldenV4(name: string): string {
  const text = readFileSync(join(GOLDEN, `${name}.golden`), 'utf8');
  const head = 'iptables-save\nip6tables-save\n';
  assert.ok(text.startsWith(head) && text.endsWith('iptables-save\n'));
  return text.slice(head.length, text.length - 'iptables-save\n'.length);
}

test('--dry-run with Istio flags prints the golden restore input (ip-range case)', () => {
  const resolv = join(tmp, 'resolv.conf');
  writeFileSync(resolv, '# test\nsearch svc.cluster.local\nnameserver 127.0.0.53\noptions ndots:5\n');
  const r = run(['-n', '--ipv6=false', '-x', '1.1.0.0/16', '-i', '9.9.0.0/16', '--redirect-dns', '-g', '1,2', '-u', '3,4',
    '--resolv-conf', resolv]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `# iptables-restore --noflush\n${goldenV4('ip-range')}`);
});

test('--dry-run with long flags and = values (inbound-ports-tproxy case)', () => {
  const r = run(['--dry-run', '--ipv6=false', '--istio-inbound-ports=32000,31000', '--istio-inbound-interception-mode', 'TPROXY',
    '--proxy-uid=1337']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `# iptables-restore --noflush\n${goldenV4('inbound-ports-tproxy')}`);
});

test("Istio's environment variables set the options; flags win over them", () => {
  const r = run(['-n', '--ipv6=false', '-u', '1337', '-p', '15999'], {
    ENVOY_PORT: '15111',
    INBOUND_CAPTURE_PORT: '15222',
    ISTIO_INBOUND_PORTS: '*',
    ISTIO_LOCAL_EXCLUDE_PORTS: '15020',
    ISTIO_SERVICE_CIDR: '*',
    ISTIO_META_DNS_CAPTURE: 'true',
    CAPTURE_ALL_DNS: 'true',
    INVALID_DROP: 'true',
    ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE: '888',
  });
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.split('\n');
  for (const want of [
    '-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15999',
    '-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15222',
    '-A ISTIO_INBOUND -p tcp --dport 15020 -j RETURN',
    '-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT',
    '-A ISTIO_OUTPUT_DNS -p udp --dport 53 -j REDIRECT --to-port 15053',
    '-A PREROUTING -m conntrack --ctstate INVALID -j ISTIO_DROP',
    '-A ISTIO_OUTPUT -m owner --gid-owner 888 -j RETURN',
    '-A ISTIO_OUTPUT -j ISTIO_REDIRECT',
  ]) {
    assert.ok(lines.includes(want), `missing ${want}\n${r.stdout}`);
  }
  assert.ok(!r.stdout.includes('15111'));
});

test('--ipv6=true prints both families', () => {
  const r = run(['-n', '--ipv6=true', '-u', '1337', '-b', '4000,5000']);
  assert.equal(r.code, 0, r.stderr);
  const [v4, v6] = r.stdout.split('# ip6tables-restore --noflush\n');
  assert.match(v4 ?? '', /-s 127\.0\.0\.6\/32/);
  assert.match(v6 ?? '', /-s ::6\/128/);
});

test('bad flags and values exit 2 with a clear message and no stack trace', () => {
  const cases: [string[], RegExp][] = [
    [['--no-such-flag'], /unknown flag --no-such-flag/],
    [['-Z'], /unknown flag -Z/],
    [['-p'], /-p needs a value/],
    [['--dry-run=maybe'], /--dry-run takes true or false/],
    [['stray'], /unexpected argument "stray"/],
    [['-n', '-p', '99999', '-b', 'http', '-m', 'tproxy'], /-p\/--envoy-port="99999".*\n.*-m\/--istio-inbound-interception-mode|-m\/--istio-inbound-interception-mode/s],
    [['-n', '--probe-timeout', 'soon'], /--probe-timeout.*not a duration/],
  ];
  for (const [args, re] of cases) {
    const r = run(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(r.stdout, '');
  }
  const bad = run(['-n', '--ipv6=false', '-b', 'http,22', '-i', '10.0.0.0/33']);
  assert.match(bad.stderr, /-b\/--istio-inbound-ports="http,22" has "http"/);
  assert.match(bad.stderr, /-i\/--istio-service-cidr="10\.0\.0\.0\/33"/);
});

test('an unreadable --resolv-conf with DNS capture is a clear failure (exit 1)', () => {
  const r = run(['-n', '--ipv6=false', '--redirect-dns', '--resolv-conf', join(tmp, 'missing.conf')]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /ERR_IPTABLES_RESOLV_CONF: cannot read .*missing\.conf/);
});

test('a missing --network-namespace is a clear failure (exit 1)', () => {
  const r = run(['--ipv6=false', '-u', '1337', '--network-namespace', join(tmp, 'no-such-netns')]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /ERR_IPTABLES_NETNS: network namespace .*no-such-netns does not exist/);
});

test('--help lists the short and long flags', () => {
  const r = run(['--help']);
  assert.equal(r.code, 0);
  for (const f of ['-p, --envoy-port', '-z, --inbound-capture-port', '-m, --istio-inbound-interception-mode', '--cleanup-only',
    '--run-validation', '--resolv-conf', '--ipv6']) {
    assert.ok(r.stdout.includes(f), f);
  }
});

test('certbroker istio-iptables routes to the same program', () => {
  const script = `
    import { Command } from 'commander';
    const { command } = await import(${JSON.stringify(CLI_MODULE)});
    const program = new Command('certbroker').addCommand(command());
    await program.parseAsync(['node', 'certbroker', 'istio-iptables', ...process.argv.slice(1)]);
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script, '--', '-n', '--ipv6=false', '-p', '15005',
    '--bogus'], { encoding: 'utf8', env: BASE_ENV, cwd: repoRoot });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /unknown flag --bogus/);
  const ok = spawnSync(process.execPath, ['--input-type=module', '-e', script, '--', '-n', '--ipv6=false', '-p', '15005',
    '-u', '1337'], { encoding: 'utf8', env: BASE_ENV, cwd: repoRoot });
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15005/);
});

const skip = netnsUnavailable();
if (skip !== undefined) console.log(`# skipping netns CLI tests: ${skip}`);

function netns(addresses?: readonly string[]): TestNetns {
  const n = createNetns(addresses === undefined ? {} : { addresses });
  spaces.push(n);
  return n;
}

/** Runs a Node script inside the netns (optionally as another uid/gid) and returns its stdout. */
function nodeIn(ns: TestNetns, script: string, ids?: { uid: number; gid: number }) {
  const pre = ids === undefined ? [] : [`--setuid=${ids.uid}`, `--setgid=${ids.gid}`];
  return spawnSync('nsenter', [`--net=${ns.path}`, ...pre, '--', process.execPath, '--input-type=module', '-e', script], {
    encoding: 'utf8',
    env: BASE_ENV,
    timeout: 20_000,
  });
}

test('apply in a netns: outbound TCP lands on the proxy port; cleanup-only removes everything', { skip }, () => {
  const ns = netns(['10.1.0.5/24']);
  const applied = run(['--network-namespace', ns.path, '-u', '1337', '-g', '1337', '-i', '*', '-b', '*', '-d', '15020']);
  assert.equal(applied.code, 0, applied.stderr);
  assert.ok(ruleLines(ns.exec('iptables-save', [])).includes('-A OUTPUT -j ISTIO_OUTPUT'));

  // From an app (uid 0, not the proxy) to an address outside the pod: lands on :15001.
  const probe = nodeIn(ns, `
    import { createServer, connect } from 'node:net';
    const server = createServer((s) => s.once('data', (d) => { console.log('proxy got ' + d); s.end(); server.close(); }));
    server.listen(15001, '0.0.0.0', () => {
      const c = connect({ host: '10.1.0.99', port: 80 }, () => c.end('hello'));
      c.on('error', (e) => { console.log('client error ' + e.code); server.close(); });
    });
    setTimeout(() => { console.log('timeout'); process.exit(3); }, 5000).unref();
  `);
  assert.equal(probe.stdout.trim(), 'proxy got hello', probe.stderr);

  const cleaned = run(['--network-namespace', ns.path, '--cleanup-only', '-u', '1337']);
  assert.equal(cleaned.code, 0, cleaned.stderr);
  assert.deepEqual(ruleLines(ns.exec('iptables-save', [])).filter((l) => !l.startsWith('*')), []);
});

/**
 * istio-iptables bundled as it ships (scripts/esbuild-options.mjs) into a fresh directory the proxy
 * uid can read: the checkout itself may sit where uid 1337 cannot go (a clone in a 0700 home
 * directory). Undefined, with the reason, when not even that can be made readable for it.
 */
async function mainForProxyUid(t: { after(fn: () => unknown): void }): Promise<{ main: string } | { reason: string }> {
  const dir = Scratch.forTest(t, 'cb-ipt-proxy-').dir;
  chmodSync(dir, 0o755);
  const main = join(dir, 'istio-iptables.cjs');
  const { SEA_ENTRIES, seaBundleOptions } = await seaBundleDefinition();
  const entry = SEA_ENTRIES.find((e) => e.name === 'istio-iptables')!.entry;
  await build({ ...seaBundleOptions(repoRoot, entry), outfile: main, logLevel: 'silent' });
  chmodSync(main, 0o644);
  const probe = spawnSync(process.execPath, ['-e', `require('node:fs').accessSync(${JSON.stringify(main)}, 4)`], { uid: 1337, gid: 1337, encoding: 'utf8' });
  if (probe.status === 0) return { main };
  return { reason: `uid 1337 cannot run ${process.execPath} on ${main} (is ${dir}'s parent traversable?): ${(probe.stderr || String(probe.error)).trim().split('\n').at(-1)}` };
}

test('--run-validation passes as the proxy uid with the rules and fails with 126 without', { skip }, async (t) => {
  const proxyMain = await mainForProxyUid(t);
  if ('reason' in proxyMain) {
    t.skip(proxyMain.reason);
    return;
  }
  const ns = netns(['10.1.0.6/24']);
  const validate = (timeout: string) =>
    ['--run-validation', '--skip-rule-apply', '--ipv6=false', '-u', '1337', '--probe-timeout', timeout];
  const asProxy = (args: string[]) =>
    spawnSync('nsenter', [`--net=${ns.path}`, '--setuid=1337', '--setgid=1337', '--', process.execPath, proxyMain.main, ...args], {
      encoding: 'utf8',
      env: BASE_ENV,
      timeout: 20_000,
    });

  const before = asProxy(validate('1s'));
  assert.equal(before.status, 126, before.stderr);
  assert.match(before.stderr, /ERR_IPTABLES_VALIDATION: iptables validation failed/);

  const applied = run(['--network-namespace', ns.path, '-u', '1337', '-i', '*', '--ipv6=false']);
  assert.equal(applied.code, 0, applied.stderr);
  const afterApply = asProxy(validate('10s'));
  assert.equal(afterApply.status, 0, afterApply.stderr);
  assert.match(afterApply.stderr, /iptables validation passed/);
});

test('inbound TCP from another namespace to an app port lands on the inbound capture port', { skip }, async () => {
  const client = netns();
  const pod = netns();
  linkPair(client, pod, '10.3.0.1/24', '10.3.0.2/24');
  const applied = run(['--network-namespace', pod.path, '-u', '1337', '-b', '*', '-d', '15020', '-i', '*', '--ipv6=false']);
  assert.equal(applied.code, 0, applied.stderr);

  const listener = spawn('nsenter', [`--net=${pod.path}`, '--', process.execPath, '--input-type=module', '-e', `
    import { createServer } from 'node:net';
    const server = createServer((s) => s.once('data', (d) => { console.log('inbound got ' + d); s.end(); server.close(); }));
    server.listen(15006, '0.0.0.0', () => console.log('listening'));
    setTimeout(() => process.exit(3), 8000).unref();
  `], { env: BASE_ENV });
  let out = '';
  const exited = new Promise<void>((r) => listener.on('close', () => r()));
  await new Promise<void>((r) => listener.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('listening')) r();
  }));
  const c = nodeIn(client, `
    import { connect } from 'node:net';
    const c = connect({ host: '10.3.0.2', port: 8080 }, () => c.end('to-app'));
    c.on('error', (e) => console.log('client error ' + e.code));
  `);
  assert.equal(c.stdout, '', c.stderr);
  await exited;
  assert.match(out, /inbound got to-app/);
});
