/**
 * The applier against real iptables / ip in throwaway network namespaces: apply, the rules are
 * there (iptables-save), applying twice leaves one copy, cleanup leaves nothing; both backends
 * when installed; IPv6 and TPROXY routes; detection of the pod's address family.
 */
import { test, after } from 'node:test';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import assert from 'node:assert/strict';
import {
  IptablesApplier,
  applyCapture,
  buildRestorePlan,
  detectIPv6,
  systemRunner,
  type IptablesSettings,
} from '../../../src/cni/iptables/index.js';
import { createNetns, linkPair, netnsUnavailable, ruleLines, type TestNetns } from './netns.js';

const skip = netnsUnavailable();
if (skip !== undefined) console.log(`# skipping netns applier tests: ${skip}`);

const spaces: TestNetns[] = [];
after(() => spaces.forEach((n) => n.remove()));
function netns(addresses?: readonly string[]): TestNetns {
  const n = createNetns(addresses === undefined ? {} : { addresses });
  spaces.push(n);
  return n;
}

const FULL: IptablesSettings = {
  inboundPortsInclude: '*',
  inboundPortsExclude: '15020,15021,15090',
  inboundInterceptionMode: 'TPROXY',
  outboundIPRangesInclude: '*',
  outboundIPRangesExclude: '10.96.0.0/12,fd00::/8',
  outboundPortsExclude: '15020',
  excludeInterfaces: 'not-istio-nic',
  rerouteVirtualInterfaces: 'veth9',
  redirectDNS: true,
  dnsServersV4: ['10.96.0.10'],
  dnsServersV6: ['fd00::10'],
  dropInvalid: true,
  enableIPv6: true,
};

for (const mode of ['nft', 'legacy'] as const) {
  test(`apply, re-apply and cleanup in a fresh netns (${mode})`, { skip }, async () => {
    const ns = netns();
    const applier = new IptablesApplier({ netnsPath: ns.path, mode });
    const plan = buildRestorePlan(FULL);
    const save4 = `iptables-${mode}-save`;
    const save6 = `ip6tables-${mode}-save`;

    const first = await applier.apply(plan);
    assert.equal(first.backend, mode);
    assert.equal(first.reconciled, false);
    const v4 = ruleLines(ns.exec(save4, []));
    const v6 = ruleLines(ns.exec(save6, []));
    for (const want of [':ISTIO_INBOUND', ':ISTIO_OUTPUT', ':ISTIO_OUTPUT_DNS', ':ISTIO_TPROXY', ':ISTIO_DIVERT', ':ISTIO_DROP']) {
      assert.ok(v4.includes(want), `v4 ${want}`);
      assert.ok(v6.includes(want), `v6 ${want}`);
    }
    assert.ok(v4.includes('-A PREROUTING -i not-istio-nic -j RETURN'), v4.join('\n'));
    assert.ok(v4.includes('-A ISTIO_OUTPUT -d 10.96.0.0/12 -j RETURN'));
    assert.ok(v6.includes('-A ISTIO_OUTPUT -d fd00::/8 -j RETURN'));
    assert.ok(v4.some((l) => /^-A ISTIO_TPROXY ! -d 127\.0\.0\.1\/32 -p tcp -j TPROXY --on-port 15006/.test(l)));
    assert.ok(v6.some((l) => /^-A ISTIO_OUTPUT_DNS .*-d fd00::10\/128 .*--to-ports 15053/.test(l)));
    assert.match(ns.exec('ip', ['-4', 'rule', 'show']), /fwmark 0x539 lookup 133/);
    assert.match(ns.exec('ip', ['-6', 'rule', 'show']), /fwmark 0x539 lookup 133/);
    assert.match(ns.exec('ip', ['-4', 'route', 'show', 'table', '133', 'type', 'local']), /local default dev lo/);
    assert.match(ns.exec('ip', ['-6', 'addr', 'show', 'dev', 'lo']), /inet6 ::6\/128/);

    // A second apply replaces the first: same rules, one copy, one ip rule.
    const second = await applier.apply(plan);
    assert.equal(second.reconciled, true);
    assert.deepEqual(ruleLines(ns.exec(save4, [])), v4);
    assert.deepEqual(ruleLines(ns.exec(save6, [])), v6);
    assert.equal(ns.exec('ip', ['-4', 'rule', 'show']).match(/fwmark 0x539/g)?.length, 1);

    const report = await applier.cleanup(plan.config);
    assert.equal(report.ipRulesRemoved, 2);
    for (const save of [save4, save6]) {
      const left = ruleLines(ns.exec(save, [])).filter((l) => !l.startsWith('*'));
      assert.deepEqual(left, [], `${save} after cleanup`);
    }
    assert.doesNotMatch(ns.exec('ip', ['-4', 'rule', 'show']), /fwmark/);
    assert.doesNotMatch(ns.exec('ip', ['-6', 'rule', 'show']), /fwmark/);
    assert.doesNotMatch(ns.exec('ip', ['-6', 'addr', 'show', 'dev', 'lo']), /::6\/128/);
    // Cleanup again: nothing to do, no error.
    const again = await applier.cleanup(plan.config);
    assert.deepEqual(again.removed, { v4: '', v6: '' });
  });
}

test('cleanup keeps rules that are not Istio\'s', { skip }, async () => {
  const ns = netns();
  ns.exec('iptables-restore', ['--noflush'], '*nat\n-N MINE\n-A OUTPUT -p tcp --dport 9 -j MINE\n-A MINE -j RETURN\nCOMMIT\n');
  const applier = new IptablesApplier({ netnsPath: ns.path });
  const plan = buildRestorePlan({ inboundPortsInclude: '8080', outboundIPRangesInclude: '*' });
  await applier.apply(plan);
  await applier.cleanup(plan.config);
  assert.deepEqual(ruleLines(ns.exec('iptables-save', [])).filter((l) => l.startsWith('-A')), [
    '-A OUTPUT -p tcp -m tcp --dport 9 -j MINE',
    '-A MINE -j RETURN',
  ]);
});

test('a bad restore input fails with ERR_IPTABLES_COMMAND and changes nothing', { skip }, async () => {
  const ns = netns();
  const applier = new IptablesApplier({ netnsPath: ns.path });
  const plan = buildRestorePlan({});
  const broken = { ...plan, v4: plan.v4.replace('-j REDIRECT --to-ports 15001', '-j NO_SUCH_TARGET_X') };
  await assert.rejects(applier.apply(broken), (err: unknown) => (err as { code?: string }).code === 'ERR_IPTABLES_COMMAND');
  assert.deepEqual(ruleLines(ns.exec('iptables-save', [])).filter((l) => l.startsWith('-A') || l.startsWith(':')), []);
});

test('IPv6 detection follows the pod addresses', { skip }, async () => {
  const cases: [readonly string[] | undefined, boolean, boolean | undefined][] = [
    [['10.1.0.5/24'], false, false],
    [['fd00:1::5/64'], false, true],
    [['10.1.0.5/24', 'fd00:1::5/64'], false, false],
    [['10.1.0.5/24', 'fd00:1::5/64'], true, true],
    [undefined, false, undefined],
  ];
  for (const [addrs, dualStack, want] of cases) {
    const ns = netns(addrs);
    assert.equal(await detectIPv6(systemRunner({ netnsPath: ns.path }), dualStack), want, JSON.stringify(addrs));
  }
});

test('backend detection follows the hint kubelet leaves, else the backend with rules', { skip }, async () => {
  const legacy = netns();
  legacy.exec('iptables-legacy-restore', ['--noflush'], '*mangle\n-N KUBE-IPTABLES-HINT\nCOMMIT\n');
  assert.equal((await new IptablesApplier({ netnsPath: legacy.path }).binaries()).mode, 'legacy');
  const nft = netns();
  nft.exec('iptables-nft-restore', ['--noflush'], '*filter\n-A INPUT -p tcp --dport 1 -j ACCEPT\nCOMMIT\n');
  assert.equal((await new IptablesApplier({ netnsPath: nft.path }).binaries()).mode, 'nft');
  const legacyRules = netns();
  legacyRules.exec('iptables-legacy-restore', ['--noflush'], '*filter\n-A INPUT -p tcp --dport 1 -j ACCEPT\nCOMMIT\n');
  assert.equal((await new IptablesApplier({ netnsPath: legacyRules.path }).binaries()).mode, 'legacy');
});

test('applyCapture detects an IPv6-only pod and programs both families in its netns', { skip }, async () => {
  const ns = netns(['fd00:1::7/64']);
  const settings: IptablesSettings = { inboundPortsInclude: '*', outboundIPRangesInclude: '*', proxyUID: '1337' };
  const dry = await applyCapture(settings, { netnsPath: ns.path, dryRun: true });
  assert.equal(dry.report, undefined);
  assert.deepEqual(ruleLines(ns.exec('ip6tables-save', [])).filter((l) => l.startsWith('-A')), []);
  const { plan, report } = await applyCapture(settings, { netnsPath: ns.path });
  assert.equal(plan.config.enableIPv6, true);
  assert.deepEqual(report?.families, ['v4', 'v6']);
  assert.ok(ruleLines(ns.exec('ip6tables-save', [])).includes('-A ISTIO_OUTPUT -j ISTIO_REDIRECT'));
});

test('cleanup with default settings also removes TPROXY marks of a custom proxy uid', { skip }, async () => {
  const ns = netns();
  const applier = new IptablesApplier({ netnsPath: ns.path });
  const custom = buildRestorePlan({ inboundPortsInclude: '*', inboundInterceptionMode: 'TPROXY', outboundIPRangesInclude: '*',
    proxyUID: '1000670000', proxyGID: '1000670001' });
  await applier.apply(custom);
  assert.ok(ruleLines(ns.exec('iptables-save', [])).some((l) => l.includes('--uid-owner 1000670000 -j MARK')));
  // What the CNI plugin does at DEL: it does not know the pod's settings.
  await applier.cleanup(buildRestorePlan({ inboundInterceptionMode: 'TPROXY' }).config);
  assert.deepEqual(ruleLines(ns.exec('iptables-save', [])).filter((l) => l.startsWith('-A')), []);
  assert.doesNotMatch(ns.exec('ip', ['rule', 'show']), /fwmark/);
});

const PYTHON = '/usr/bin/python3';
// A transparent (IP_TRANSPARENT) listener, which TPROXY requires and Node cannot open.
const TRANSPARENT_LISTENER = `
import socket
s = socket.socket()
s.setsockopt(socket.SOL_IP, 19, 1)  # IP_TRANSPARENT
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 15006)); s.listen(5); s.settimeout(8)
print("listening", flush=True)
c, _ = s.accept()
print("got %s at %s:%d" % ((c.recv(100).decode(),) + c.getsockname()), flush=True)
`;

test('TPROXY for real: inbound TCP reaches the transparent listener with its original destination', {
  skip: skip ?? (existsSync(PYTHON) ? undefined : 'python3 is needed for an IP_TRANSPARENT listener'),
}, async () => {
  const client = netns();
  const pod = netns();
  linkPair(client, pod, '10.4.0.1/24', '10.4.0.2/24');
  const plan = buildRestorePlan({ inboundPortsInclude: '*', inboundInterceptionMode: 'TPROXY', outboundIPRangesInclude: '*' });
  await new IptablesApplier({ netnsPath: pod.path }).apply(plan);

  const listener = spawn('nsenter', [`--net=${pod.path}`, '--', PYTHON, '-c', TRANSPARENT_LISTENER]);
  let out = '';
  const exited = new Promise<void>((r) => listener.on('close', () => r()));
  await new Promise<void>((r) => listener.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('listening')) r();
  }));
  const c = spawnSync('nsenter', [`--net=${client.path}`, '--', process.execPath, '-e', `
    const c = require('node:net').connect({ host: '10.4.0.2', port: 8080 }, () => c.end('tproxied'));
    c.on('error', (e) => console.log('client error ' + e.code));
  `], { encoding: 'utf8', timeout: 10_000 });
  assert.equal(c.stdout, '', c.stderr);
  await exited;
  assert.match(out, /got tproxied at 10\.4\.0\.2:8080/);
});
