/**
 * The independent IstioCertificateService client the interop tests drive: Python grpcio
 * (test/ca/support/interop_client.py) with stubs generated from proto/istio/v1/auth/ca.proto at
 * test time. Only after `pythonGrpcMissing()` (test/support/tools.ts) said it is there.
 *
 *   const stubs = await writeCaStubs(dir);
 *   const answer = await interopCall({ stubs, target: `127.0.0.1:${port}`, rootsFile, csrFile, tokenFile, impersonate, ttlSeconds });
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { protoRootFor } from '../../../src/grpc/index.js';
import { REPO_ROOT } from '../../support/fixtures.js';
import { TEST_PYTHON, writePythonGrpcStubs } from '../../support/tools.js';

const run = promisify(execFile);

/** The client script, in the source tree (tests run from dist/). */
export const INTEROP_CLIENT = join(REPO_ROOT, 'test/ca/support/interop_client.py');

/** Generates the Python stubs of ca.proto into `dir`; returns `dir`. */
export async function writeCaStubs(dir: string): Promise<string> {
  const proto = 'istio/v1/auth/ca.proto';
  await writePythonGrpcStubs(protoRootFor(proto), dir, [proto]);
  return dir;
}

export interface InteropAnswer {
  readonly cert_chain?: string[];
  /** The gRPC status name (`UNAUTHENTICATED`, ...). */
  readonly code?: string;
  readonly details?: string;
}

/** One CreateCertificate over TLS (trusting `rootsFile`, TLS name `localhost`) by the Python client. */
export async function interopCall(o: {
  readonly stubs: string;
  readonly target: string;
  readonly rootsFile: string;
  readonly csrFile: string;
  readonly tokenFile: string;
  readonly impersonate?: string;
  readonly ttlSeconds?: number;
}): Promise<InteropAnswer> {
  const { stdout } = await run(TEST_PYTHON, [INTEROP_CLIENT, o.stubs, o.target, o.rootsFile, o.csrFile, o.tokenFile, o.impersonate ?? '', String(o.ttlSeconds ?? 0)]);
  return JSON.parse(stdout) as InteropAnswer;
}
