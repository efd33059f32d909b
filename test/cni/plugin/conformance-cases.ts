/**
 * Istio's CNI plugin dry-run cases (test/fixtures/istio/istio-cni-plugin/cases.json) as Pod
 * objects: the pod Istio's test builds (containers test, istio-proxy, istio-validate) with the
 * case's annotations, istio-proxy env and securityContext.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CNI_PLUGIN_FIXTURES } from '../../support/fixtures.js';

export const CNI_CONFORMANCE_DIR = CNI_PLUGIN_FIXTURES;

export interface CniCase {
  readonly annotations: Record<string, string>;
  readonly proxyEnv?: Record<string, string>;
  readonly runAsUser?: number;
  readonly runAsGroup?: number;
  readonly golden: string;
}

export function loadCniCases(): Record<string, CniCase> {
  const parsed = JSON.parse(readFileSync(join(CNI_CONFORMANCE_DIR, 'cases.json'), 'utf8')) as { cases: Record<string, CniCase> };
  return parsed.cases;
}

export function goldenText(c: CniCase): string {
  return readFileSync(join(CNI_CONFORMANCE_DIR, 'golden', c.golden), 'utf8');
}

export function casePod(name: string, namespace: string, c: CniCase): Record<string, unknown> {
  const securityContext: Record<string, number> = {};
  if (c.runAsUser !== undefined) securityContext.runAsUser = c.runAsUser;
  if (c.runAsGroup !== undefined) securityContext.runAsGroup = c.runAsGroup;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, annotations: c.annotations },
    spec: {
      containers: [
        { name: 'test', image: 'app' },
        {
          name: 'istio-proxy',
          image: 'proxyv2',
          env: Object.entries(c.proxyEnv ?? {}).map(([k, v]) => ({ name: k, value: v })),
          securityContext,
        },
        { name: 'istio-validate', image: 'proxyv2' },
      ],
    },
  };
}
