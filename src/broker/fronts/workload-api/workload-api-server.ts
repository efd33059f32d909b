/**
 * Serves the SPIFFE Workload API on a node Unix socket: plain gRPC (the SPIFFE Workload Endpoint
 * forbids requiring TLS; callers are authenticated by attestation), the socket connectable by any
 * local process (0666 in a 0755 directory that only the broker can write). The broker accepts
 * each connection itself — so it holds the socket, starts the caller's attestation at once and
 * tags it — and hands it to grpc-js through a connection injector. gRPC health and reflection
 * (which the Workload Endpoint recommends, so clients can discover services) ride on the same socket.
 */
import { chmodSync, rmSync } from 'node:fs';
import { createServer, type Server as NetServer } from 'node:net';
import { dirname } from 'node:path';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { Logger } from '../../../core/log.js';
import { HealthService } from '../../../grpc/health.js';
import { addReflection } from '../../../grpc/reflection.js';
import { compressionFlagGuard } from '../../../grpc/request-guard.js';
import { stopServer } from '../../../grpc/server-lifecycle.js';
import { HEALTH_PROTO, WHOLE_SERVER } from '../../../protocol/grpc-health.js';
import { WORKLOAD_API_PROTO, WORKLOAD_API_SERVICE } from '../../../protocol/workload-api.js';
import { prepareSharedSocketPath, SHARED_SOCKET_MODE } from '../../adapters/unix-socket.js';
import { verifyPeerCredentials } from '../../attestation/index.js';
import type { AttestedConnections } from './attested-connections.js';
import type { WorkloadApiService } from './workload-api.js';
import { workloadApiServiceDefinition } from './workload-api-proto.js';

export interface WorkloadApiServerOptions {
  /** Filesystem path of the Unix socket. */
  readonly socketPath: string;
  readonly service: WorkloadApiService;
  readonly connections: AttestedConnections;
  readonly logger: Logger;
  /** A connection with no call open this long is closed (GOAWAY). Default: never. */
  readonly idleConnectionMs?: number;
}

export interface WorkloadApiServer {
  readonly socketPath: string;
  readonly health: HealthService;
  stop(deadlineMs: number): Promise<void>;
}

function listen(server: NetServer, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export async function startWorkloadApiServer(options: WorkloadApiServerOptions): Promise<WorkloadApiServer> {
  const { socketPath, logger, connections } = options;
  prepareSharedSocketPath(socketPath);
  // Starts the peer-credentials helper (if the source has one), then proves SO_PEERCRED works
  // here before any workload depends on it.
  const peers = connections.attestor.peers;
  await peers.start?.(dirname(socketPath));
  try {
    await verifyPeerCredentials(peers, dirname(socketPath));
  } catch (err) {
    peers.stop?.();
    throw err;
  }
  const limits = connections.limits?.config;
  const server = new Server({
    'grpc.keepalive_permit_without_calls': 1,
    // One connection cannot open more streams at once than its caller may hold (HTTP/2 SETTINGS).
    ...(limits ? { 'grpc.max_concurrent_streams': limits.maxStreamsPerCaller } : {}),
    // Also a connection that never sends its HTTP/2 preface: the idle clock starts at accept.
    ...(options.idleConnectionMs !== undefined ? { 'grpc.max_connection_idle_ms': options.idleConnectionMs } : {}),
    interceptors: [compressionFlagGuard(`/${WORKLOAD_API_SERVICE}/`, logger)],
  });
  server.addService(workloadApiServiceDefinition(), options.service.implementation());
  const health = new HealthService({ [WHOLE_SERVER]: 'SERVING', [WORKLOAD_API_SERVICE]: 'SERVING' });
  health.addToServer(server);
  addReflection(server, [WORKLOAD_API_PROTO, HEALTH_PROTO]);
  const injector = server.createConnectionInjector(ServerCredentials.createInsecure());
  const listener = createServer((socket) => {
    // Past the socket's connection bound the connection is closed at once (the limits' observer logs it).
    if (connections.accept(socket)) injector.injectConnection(socket);
  });
  listener.on('error', (err) => logger.error('Workload API listener error', { err: err.message }));
  try {
    await listen(listener, socketPath);
  } catch (err) {
    peers.stop?.();
    throw err;
  }
  chmodSync(socketPath, SHARED_SOCKET_MODE);
  logger.info('Workload API listening', { socket: socketPath });
  return {
    socketPath,
    health,
    async stop(deadlineMs: number) {
      health.shutdown();
      // No new connections; the listener's close completes once grpc-js has closed the accepted
      // ones, so it is awaited after the server stops (awaited first, one open stream would hold it).
      const closed = new Promise<void>((resolve) => listener.close(() => resolve()));
      options.service.closeAll();
      await stopServer(server, deadlineMs);
      await closed;
      peers.stop?.();
      rmSync(socketPath, { force: true });
    },
  };
}
