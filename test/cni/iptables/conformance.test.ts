/**
 * Conformance: every case of Istio's istio-iptables golden tests, rebuilt byte for byte from
 * the case settings (test/fixtures/istio/istio-iptables), and the sidecar configurations the
 * istio-cni plugin derives for its dry-run goldens (test/fixtures/istio/istio-cni-plugin).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { buildRestorePlan, istioDryRunTranscript, type IptablesSettings } from '../../../src/cni/iptables/index.js';
import { CNI_PLUGIN_FIXTURES, ISTIO_IPTABLES_FIXTURES } from '../../support/fixtures.js';

const iptDir = ISTIO_IPTABLES_FIXTURES;
const cniDir = CNI_PLUGIN_FIXTURES;

interface IptCases {
  readonly base: Record<string, unknown>;
  readonly cases: Record<string, Record<string, unknown>>;
}

/** cases.json uses Istio's field names; drop the run-mode flag that is not a rule setting. */
function settingsOf(base: Record<string, unknown>, overlay: Record<string, unknown>): IptablesSettings {
  const merged: Record<string, unknown> = { ...base, ...overlay };
  delete merged.dryRun;
  return merged as IptablesSettings;
}

const iptCases = JSON.parse(readFileSync(join(iptDir, 'cases.json'), 'utf8')) as IptCases;

test('every istio-iptables golden has a case and every case a golden', () => {
  const goldens = readdirSync(join(iptDir, 'golden')).map((f) => f.replace(/\.golden$/, '')).sort();
  assert.deepEqual(Object.keys(iptCases.cases).sort(), goldens);
});

for (const [name, overlay] of Object.entries(iptCases.cases)) {
  test(`istio-iptables golden: ${name}`, () => {
    const golden = readFileSync(join(iptDir, 'golden', `${name}.golden`), 'utf8');
    const plan = buildRestorePlan(settingsOf(iptCases.base, overlay));
    assert.equal(istioDryRunTranscript(plan), golden);
  });
}

/**
 * The plugin's sidecar path turns pod annotations into istio-iptables settings; these are the
 * settings each CNI case must produce (Istio's defaults for a sidecar pod: capture all inbound
 * except the agent ports 15020, 15021, 15090; capture all outbound; exclude 15020 outbound
 * unless the pod lists its own exclusions). The builder must reproduce the golden from them.
 */
const CNI_SIDECAR_BASE: IptablesSettings = {
  inboundPortsInclude: '*',
  inboundPortsExclude: '15020,15021,15090',
  outboundIPRangesInclude: '*',
  outboundPortsExclude: '15020',
};
const cniSettings: Record<string, { settings: IptablesSettings; golden: string }> = {
  basic: { settings: {}, golden: 'basic.txt.golden' },
  'include-exclude-ip': {
    settings: { outboundIPRangesInclude: '127.0.0.0/8', outboundIPRangesExclude: '10.0.0.0/8' },
    golden: 'include-exclude-ip.txt.golden',
  },
  'include-exclude-ports': {
    settings: { inboundPortsInclude: '1111,2222', inboundPortsExclude: '3333,4444', outboundPortsExclude: '5555,6666' },
    golden: 'include-exclude-ports.txt.golden',
  },
  tproxy: { settings: { inboundInterceptionMode: 'TPROXY' }, golden: 'tproxy.txt.golden' },
  dns: { settings: { redirectDNS: true, captureAllDNS: true }, golden: 'dns.txt.golden' },
  'invalid-drop': { settings: { dropInvalid: true }, golden: 'invalid-drop.txt.golden' },
  'custom-uid': { settings: { proxyUID: '1000670000', proxyGID: '1000670001' }, golden: 'custom-uid.txt.golden' },
  'custom-uid-zero': { settings: {}, golden: 'basic.txt.golden' },
  'custom-uid-tproxy': {
    settings: { inboundInterceptionMode: 'TPROXY', proxyUID: '1000670000', proxyGID: '1000670001' },
    golden: 'custom-uid-tproxy.txt.golden',
  },
};

test('every istio-cni-plugin case is covered', () => {
  const cases = JSON.parse(readFileSync(join(cniDir, 'cases.json'), 'utf8')) as { cases: Record<string, unknown> };
  assert.deepEqual(Object.keys(cases.cases).sort(), Object.keys(cniSettings).sort());
});

for (const [name, { settings, golden }] of Object.entries(cniSettings)) {
  test(`istio-cni-plugin golden (builder settings): ${name}`, () => {
    const path = join(cniDir, 'golden', golden);
    assert.ok(existsSync(path), path);
    const plan = buildRestorePlan({ ...CNI_SIDECAR_BASE, ...settings });
    assert.equal(plan.v4, readFileSync(path, 'utf8'));
    assert.equal(plan.v6, '');
  });
}
