/**
 * Each wire constant exists once in src/ (issue 11): the names, paths, headers, metadata keys,
 * type URLs and standard defaults of the protocols certbroker speaks are written as string
 * literals only in src/protocol/, and everything else refers to those constants. Comments may
 * mention them; code may not spell them again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sourceFiles } from '../habits/source-files.js';
import { stringLiterals } from './string-literals.js';

interface Probe {
  /** The wire text. */
  readonly text: string;
  /** 'exact': a literal equal to `text` (short or common words); 'within': any literal containing it. */
  readonly match: 'exact' | 'within';
  /** Files outside src/protocol/ whose literal is the same word for something else, with why. */
  readonly elsewhere?: Readonly<Record<string, string>>;
  /** Protocol files that each define the text ('exact' probes; default: exactly one). */
  readonly homes?: number;
}

const PROBES: readonly Probe[] = [
  // Istio CA
  { text: 'istio/v1/auth/ca.proto', match: 'within' },
  { text: 'istio.v1.auth.', match: 'within' },
  { text: 'CreateCertificate', match: 'exact' },
  { text: 'ImpersonatedIdentity', match: 'within' },
  { text: 'certbroker.io/serving-names', match: 'within' },
  { text: 'clusterid', match: 'exact' },
  { text: 'authorization', match: 'exact', elsewhere: { 'core/log.ts': 'a log field name whose value is redacted', 'h2/hpack-tables.ts': 'entry 23 of the HPACK static table (RFC 7541 Appendix A)' } },
  { text: 'Kubernetes', match: 'exact', elsewhere: { 'devcluster/openapi.ts': 'the OpenAPI document title' } },
  { text: 'istio-ca', match: 'exact' },
  { text: 'istio-ca-root-cert', match: 'exact' },
  { text: 'istio.io/config', match: 'exact' },
  // SPIFFE Broker API
  { text: 'spiffe/broker/broker.proto', match: 'within' },
  { text: 'spiffe.broker.', match: 'within' },
  { text: 'spiffe.reference.', match: 'within' },
  { text: 'spiffe/reference/reference.proto', match: 'within' },
  { text: 'broker.spiffe.io', match: 'within' },
  { text: 'SubscribeToX509SVID', match: 'exact' },
  { text: 'SubscribeToX509Bundles', match: 'exact' },
  { text: 'FetchJWTSVID', match: 'exact', homes: 2 }, // a method of both the Broker and the Workload API
  { text: 'SubscribeToJWTBundles', match: 'exact' },
  { text: 'spiffe.io', match: 'exact' },
  { text: 'WORKLOAD_REFERENCE_INVALID', match: 'exact' },
  { text: 'WORKLOAD_NOT_FOUND', match: 'exact' },
  { text: 'WORKLOAD_NOT_ENTITLED', match: 'exact' },
  { text: 'certbroker', match: 'exact', elsewhere: { 'cli/main.ts': 'the CLI program name', 'cli/stack-parts.ts': 'a sample pod image name' } },
  // SPIFFE Workload API
  { text: 'spiffe/workload/workload.proto', match: 'within' },
  { text: 'SpiffeWorkloadAPI', match: 'within' },
  { text: 'workload.spiffe.io', match: 'within' },
  { text: 'SPIFFE_ENDPOINT_SOCKET', match: 'within' },
  { text: 'FetchX509SVID', match: 'exact' },
  { text: 'FetchX509Bundles', match: 'exact' },
  { text: 'FetchJWTBundles', match: 'exact' },
  { text: 'ValidateJWTSVID', match: 'exact' },
  // CNI plugin -> broker
  { text: '/cmdadd', match: 'within' },
  { text: 'pluginevent.sock', match: 'within' },
  { text: '/var/run/istio-cni', match: 'within' },
  { text: 'istio-cni-kubeconfig', match: 'within' },
  // gRPC health and error details
  { text: 'grpc/health/v1/health.proto', match: 'within' },
  { text: 'grpc.health.v1', match: 'within' },
  { text: 'Check', match: 'exact' },
  { text: 'google/rpc/', match: 'within' },
  { text: 'google.rpc.', match: 'within' },
  { text: 'grpc-status-details-bin', match: 'within' },
  { text: 'certbroker-error-code', match: 'within' },
  { text: 'type.googleapis.com/', match: 'within' },
];

function hits(probe: Probe): Array<{ file: string; line: number; value: string }> {
  return sourceFiles().flatMap((f) =>
    stringLiterals(f.text)
      .filter((l) => (probe.match === 'exact' ? l.value === probe.text : l.value.includes(probe.text)))
      .map((l) => ({ file: f.path, line: l.line, value: l.value })),
  );
}

for (const probe of PROBES) {
  test(`${JSON.stringify(probe.text)} is written only in src/protocol/`, () => {
    const found = hits(probe);
    const outside = found.filter((h) => !h.file.startsWith('protocol/') && probe.elsewhere?.[h.file] === undefined);
    assert.deepEqual(outside, [], `spelled outside src/protocol/: use the constant from src/protocol instead`);
    const home = found.filter((h) => h.file.startsWith('protocol/'));
    assert.ok(home.length > 0, 'the probe finds no home in src/protocol/ (renamed? update the probe)');
    if (probe.match === 'exact') assert.equal(home.length, probe.homes ?? 1, `defined more often than once per protocol: ${JSON.stringify(home)}`);
    for (const file of Object.keys(probe.elsewhere ?? {})) {
      assert.ok(found.some((h) => h.file === file), `exception ${file} no longer needed: remove it`);
    }
  });
}

test('src/protocol/ imports nothing outside itself (the CNI plugin loads it)', () => {
  const files = sourceFiles().filter((f) => f.path.startsWith('protocol/'));
  assert.ok(files.length >= 5);
  const imports = files.flatMap((f) => [...f.text.matchAll(/\bfrom\s+'([^']+)'|\bimport\s*\(\s*'([^']+)'|^import\s+'([^']+)'/gmu)].map((m) => `${f.path}: ${m[1] ?? m[2] ?? m[3]}`));
  assert.ok(imports.length > 0);
  assert.deepEqual(imports.filter((i) => !/: \.\/[a-z0-9-]+\.js$/u.test(i)), []);
});

test('the literal scanner sees code strings and template parts, not comments or regular expressions', () => {
  const source = [
    "// 'in-a-line-comment'",
    "/* 'in-a-block-comment' */",
    "const a = 'single', b = \"double\";",
    'const t = `head-${x ? `inner-${y}` : { k: 1 }.k}-tail`;',
    "const r = /'not-a-string'/u.test(s) ? s.split('/')[0] : n / 2 / 'div';",
  ].join('\n');
  assert.deepEqual(
    stringLiterals(source).map((l) => [l.value, l.line]),
    [
      ['single', 3],
      ['double', 3],
      ['head-', 4],
      ['inner-', 4],
      ['', 4],
      ['-tail', 4],
      ['/', 5],
      ['div', 5],
    ],
  );
});
