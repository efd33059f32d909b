/**
 * The servers the HTTP/2 conformance and interop suites run against: the CA as deployed (a
 * devcluster, a pod on node-a, signing workers, TLS) on each HTTP/2 transport kind in
 * `H2_TRANSPORT_KINDS`, so CreateCertificate and health Check are answered by the real service,
 * not a stand-in. A suite runs its whole case list once per kind.
 */
import type { CaLimits, CaServer, CaServerConfig } from '../../../src/ca/index.js';
import { newCsr } from '../../ca/support/pki-fixtures.js';
import { startNodeAScenario, type CaEnv } from '../../ca/support/ca-env.js';

/** The CA's TLS transports that speak HTTP/2 themselves (grpc-js has its own suites). */
export const H2_TRANSPORT_KINDS = ['http2', 'h2'] as const satisfies ReadonlyArray<NonNullable<CaServerConfig['transport']>>;
export type H2TransportKind = (typeof H2_TRANSPORT_KINDS)[number];

export interface H2Target {
  readonly kind: H2TransportKind;
  readonly port: number;
  readonly rootsPem: string;
  /** A token of istio-system/ztunnel-a (node-a), accepted by the CA. */
  readonly ztunnel: string;
  readonly ca: CaServer;
  readonly env: CaEnv;
  /** A fresh CSR (PEM). */
  csr(): Promise<string>;
  close(): Promise<void>;
}

/** The CA on `kind` with `limits` (the rest at their defaults). */
export async function startTarget(kind: H2TransportKind, limits: Partial<CaLimits> = {}): Promise<H2Target> {
  const { env, ca, ztunnel } = await startNodeAScenario({ transport: kind, signingWorkers: 1, limits });
  return { kind, port: ca.port, rootsPem: ca.rootsPem(), ztunnel, ca, env, csr: () => newCsr(), close: () => env.close() };
}
