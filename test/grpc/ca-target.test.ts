/**
 * grpc/ca-target: the CA_ADDRESS forms and the grpc-js targets they become (a DNS name for grpc-js'
 * dns resolver, a list of IPs for its ipv4/ipv6 resolvers), the problems named, and the service
 * config every CA channel gets (round robin, UNAVAILABLE tried again).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { caServiceConfig, parseCaTarget, type CaTarget } from '../../src/grpc/index.js';

const ok = (raw: string): CaTarget => {
  const t = parseCaTarget(raw);
  assert.ok(!('problem' in t), `${raw}: ${'problem' in t ? t.problem : ''}`);
  return t;
};
const problem = (raw: string): string => {
  const t = parseCaTarget(raw);
  assert.ok('problem' in t, `${raw} accepted as ${JSON.stringify(t)}`);
  return t.problem;
};

test('a DNS name (a headless Service) is a dns:/// target; one IP stays as it is', () => {
  assert.deepEqual(ok('certbroker-ca-headless.istio-system.svc:15012'), { target: 'dns:///certbroker-ca-headless.istio-system.svc:15012', kind: 'dns', endpoints: [{ host: 'certbroker-ca-headless.istio-system.svc', port: 15012 }] });
  assert.equal(ok('dns:///istiod.istio-system.svc:15012').target, 'dns:///istiod.istio-system.svc:15012');
  assert.deepEqual(ok('10.0.0.7:15012'), { target: '10.0.0.7:15012', kind: 'static', endpoints: [{ host: '10.0.0.7', port: 15012 }] });
});

test('one address: host:port, [v6]:port, dns:/// (as the lean client takes it); other shapes are problems', () => {
  assert.deepEqual(ok('[::1]:443').endpoints, [{ host: '::1', port: 443 }]);
  assert.deepEqual(ok('dns:///ca.example:8443').endpoints, [{ host: 'ca.example', port: 8443 }]);
  for (const bad of ['ca.example', ':15012', 'ca:0', 'ca:70000', '::1:443', 'https://ca:443', 'unix:///x.sock']) problem(bad);
});

test('a list of IPs becomes grpc-js ipv4:/ipv6: targets; the grpc-js form is accepted as well', () => {
  const v4 = ok('127.0.0.1:1001, 127.0.0.2:1002,127.0.0.3:1003');
  assert.equal(v4.target, 'ipv4:127.0.0.1:1001,127.0.0.2:1002,127.0.0.3:1003');
  assert.equal(v4.endpoints.length, 3);
  assert.equal(ok('[::1]:1001,[::2]:1002').target, 'ipv6:[::1]:1001,[::2]:1002');
  assert.deepEqual(ok('ipv4:10.0.0.1:1,10.0.0.2:2').endpoints, [{ host: '10.0.0.1', port: 1 }, { host: '10.0.0.2', port: 2 }]);
});

test('refused: names in a list, mixed families, duplicates, empty entries, bad ports, no port', () => {
  assert.match(problem('10.0.0.1:1,ca.example:1'), /a list holds IP addresses only/);
  assert.match(problem('10.0.0.1:1,[::1]:1'), /mixes IPv4 and IPv6/);
  assert.match(problem('10.0.0.1:1,10.0.0.1:1'), /lists 10\.0\.0\.1:1 twice/);
  assert.match(problem('10.0.0.1:1,'), /empty address/);
  assert.match(problem('10.0.0.1:0'), /port 0 is not 1-65535/);
  assert.match(problem('ca.example'), /is not host:port/);
  assert.match(problem('ipv6:10.0.0.1:1'), /ipv6: lists IPv4 addresses/);
  assert.match(problem('[10.0.0.1]:1'), /is not an IPv6 address/);
});

test('the service config: round robin; CreateCertificate tried again on UNAVAILABLE only where there may be another endpoint', () => {
  type Config = { loadBalancingConfig: unknown[]; methodConfig?: { name: { service: string }[]; retryPolicy: { maxAttempts: number; retryableStatusCodes: string[] } }[] };
  for (const raw of ['10.0.0.1:1,10.0.0.2:1', 'certbroker-ca-headless.istio-system.svc:15012']) {
    const c = JSON.parse(caServiceConfig(ok(raw))) as Config;
    assert.deepEqual(c.loadBalancingConfig, [{ round_robin: {} }]);
    assert.equal(c.methodConfig![0]!.name[0]!.service, 'istio.v1.auth.IstioCertificateService');
    assert.deepEqual(c.methodConfig![0]!.retryPolicy.retryableStatusCodes, ['UNAVAILABLE']);
    assert.ok(c.methodConfig![0]!.retryPolicy.maxAttempts >= 2);
  }
  const single = JSON.parse(caServiceConfig(ok('10.0.0.1:15012'))) as Config;
  assert.deepEqual(single.loadBalancingConfig, [{ round_robin: {} }]);
  assert.equal(single.methodConfig, undefined, 'one IP: nothing else to try');
});
