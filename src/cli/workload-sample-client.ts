/**
 * The local stack's Workload API sample client, run as its own process (`node
 * workload-sample-client.js <socket>`) so the broker attests it from the kernel: it waits for a
 * line on stdin (the stack has moved it into a pod's cgroup by then), opens a `FetchX509SVID`
 * stream on the Workload API socket with the `workload.spiffe.io` header, and prints one JSON
 * line per message (the SPIFFE ID, serial and notAfter of each SVID) or the stream's error.
 */
import { X509Certificate } from 'node:crypto';
import { createInterface } from 'node:readline';
import { WorkloadApiClient } from '../broker/client/workload-api-client.js';
import { splitDerCertificates } from '../pki/x509-fields.js';
import type { X509SVIDResponse } from '../protocol/workload-api.js';

/** One line the client prints. */
export type WorkloadSampleLine =
  | { readonly svids: ReadonlyArray<{ readonly spiffeId: string; readonly serial: string; readonly notAfter: number }> }
  | { readonly error: string };

function start(socketPath: string): void {
  const client = new WorkloadApiClient(socketPath);
  const print = (line: WorkloadSampleLine) => process.stdout.write(`${JSON.stringify(line)}\n`);
  const stream = client.fetchX509Svid();
  stream.on('data', (m: X509SVIDResponse) => {
    print({
      svids: m.svids.map((s) => {
        const leaf = new X509Certificate(splitDerCertificates(s.x509_svid)[0]!);
        return { spiffeId: s.spiffe_id, serial: leaf.serialNumber.toLowerCase(), notAfter: Date.parse(leaf.validTo) };
      }),
    });
  });
  stream.on('error', (e: { readonly code?: number; readonly details?: string; readonly message: string }) => {
    print({ error: `${e.code === undefined ? '' : `code ${e.code}: `}${e.details || e.message}` });
    client.close();
  });
}

if (process.argv[2] !== undefined) {
  const socketPath = process.argv[2];
  const lines = createInterface({ input: process.stdin });
  lines.once('line', () => start(socketPath));
  // The stack going away ends this process too.
  lines.once('close', () => process.exit(0));
}
