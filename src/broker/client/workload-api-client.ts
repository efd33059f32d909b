/**
 * A SPIFFE Workload API client over the node's Unix socket (the local stack's sample client and
 * tools): `fetchX509Svid()` opens a FetchX509SVID stream with the `workload.spiffe.io` header.
 * The broker attests the caller from the kernel, so what it receives depends on the process's
 * pod cgroup, never on anything it sends.
 */
import { Client, credentials, Metadata, type ClientReadableStream } from '@grpc/grpc-js';
import { serviceDefinitionOf, typedMethod } from '../../grpc/typed-methods.js';
import { WORKLOAD_API_METHOD, WORKLOAD_API_PROTO, WORKLOAD_API_SERVICE, WORKLOAD_HEADER, WORKLOAD_HEADER_VALUE, type X509SVIDRequest, type X509SVIDResponse } from '../../protocol/workload-api.js';

export class WorkloadApiClient {
  readonly #client: Client;

  constructor(socketPath: string) {
    this.#client = new Client(`unix:${socketPath}`, credentials.createInsecure());
  }

  /** The caller's X509-SVIDs: the full set at once, again on every rotation. */
  fetchX509Svid(): ClientReadableStream<X509SVIDResponse> {
    const method = typedMethod<X509SVIDRequest, X509SVIDResponse>(serviceDefinitionOf([WORKLOAD_API_PROTO], WORKLOAD_API_SERVICE), WORKLOAD_API_METHOD.fetchX509Svid);
    const md = new Metadata();
    md.set(WORKLOAD_HEADER, WORKLOAD_HEADER_VALUE);
    return this.#client.makeServerStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, {}, md);
  }

  close(): void {
    this.#client.close();
  }
}
