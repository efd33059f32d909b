/**
 * broker/client — the consumer side of the Broker API:
 *
 * - `BrokerClient`: a Broker API client over the Unix socket with mTLS (tests, benchmarks, the
 *   local stack); `firstMessage`.
 * - `WorkloadApiClient`: a SPIFFE Workload API client on the node socket (FetchX509SVID; the
 *   local stack's sample client).
 * - `runFetch` (`certbroker fetch`) / `writeSvidFiles`: a small consumer for operators.
 *
 * May import the fronts' wire helpers (the pod reference), the CA client (its own SVID) and the
 * broker's config defaults; nothing imports the client but tools and tests.
 */
export { BrokerClient, firstMessage, type BrokerClientOptions, type ClientConstructor, type ClientReference, type ClientStreamOptions } from './broker-client.js';
export { WorkloadApiClient } from './workload-api-client.js';
export { runFetch, writeSvidFiles, type FetchOptions } from './fetch.js';
