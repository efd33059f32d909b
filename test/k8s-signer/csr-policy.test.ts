/** What `certbroker k8s-signer` signs (csr-policy.ts, pure): one SPIFFE URI SAN of its trust domain with SVID usages, or a serving certificate for a listed requester. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { judgeCsr, type CsrRequestFacts } from '../../src/k8s-signer/index.js';

const POLICY = { trustDomain: 'cluster.local', servingRequesters: ['istio-system/certbroker-ca'] };
const facts = (f: Partial<CsrRequestFacts>): CsrRequestFacts => ({ uris: [], dnsNames: [], ipAddresses: [], emails: [], otherSans: 0, usages: ['digital signature', 'key encipherment', 'server auth', 'client auth'], username: 'system:serviceaccount:istio-system:certbroker-ca', ...f });
const SLEEP = 'spiffe://cluster.local/ns/default/sa/sleep';

test('one SPIFFE URI SAN of the trust domain with SVID usages is an SVID', () => {
  assert.deepEqual(judgeCsr(facts({ uris: [SLEEP] }), POLICY), { kind: 'svid', spiffeId: SLEEP });
  assert.deepEqual(judgeCsr(facts({ uris: [SLEEP], usages: ['digital signature'] }), POLICY), { kind: 'svid', spiffeId: SLEEP }, 'fewer usages are fine');
});

for (const [what, f, reason] of [
  ['no SAN', {}, 'SANNotAllowed'],
  ['two URIs', { uris: [SLEEP, 'spiffe://cluster.local/ns/a/sa/b'] }, 'SANNotAllowed'],
  ['a URI and a DNS name from someone not on the serving list', { uris: [SLEEP], dnsNames: ['sleep.default.svc'], username: 'system:serviceaccount:default:sleep' }, 'SANNotAllowed'],
  ['an e-mail SAN', { uris: [SLEEP], emails: ['a@example.com'] }, 'SANNotAllowed'],
  ['an otherName SAN', { uris: [SLEEP], otherSans: 1 }, 'SANNotAllowed'],
  ['an https URI', { uris: ['https://example.com/x'] }, 'SPIFFEIDNotAllowed'],
  ['another trust domain', { uris: ['spiffe://evil.example/ns/default/sa/sleep'] }, 'SPIFFEIDNotAllowed'],
  ['cert sign usage', { uris: [SLEEP], usages: ['digital signature', 'cert sign'] }, 'UsageNotAllowed'],
  ['DNS names from someone not on the serving list', { dnsNames: ['localhost'], username: 'system:serviceaccount:default:sleep' }, 'SANNotAllowed'],
  ['DNS names from a user that is not a service account', { dnsNames: ['localhost'], username: 'alice' }, 'SANNotAllowed'],
  ['a serving request with client auth', { dnsNames: ['localhost'] }, 'UsageNotAllowed'],
] as const) {
  test(`refused: ${what} (${reason})`, () => {
    const v = judgeCsr(facts(f), POLICY);
    assert.equal(v.kind, 'refused');
    assert.equal(v.kind === 'refused' && v.reason, reason);
  });
}

test('DNS/IP names from a listed serving requester: a serving certificate with the requester\'s SPIFFE ID', () => {
  assert.deepEqual(judgeCsr(facts({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], usages: ['digital signature', 'key encipherment', 'server auth'] }), POLICY), {
    kind: 'serving',
    spiffeId: 'spiffe://cluster.local/ns/istio-system/sa/certbroker-ca',
    names: ['localhost', '127.0.0.1'],
  });
});

test('a SPIFFE URI with DNS/IP names from a listed serving requester (the CA relaying a node agent it authorized): an SVID with those names', () => {
  assert.deepEqual(judgeCsr(facts({ uris: [SLEEP], dnsNames: ['localhost'], ipAddresses: ['::1'] }), POLICY), { kind: 'svid', spiffeId: SLEEP, names: ['localhost', '::1'] });
});
