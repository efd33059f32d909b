/**
 * The standard gRPC health service (grpc.health.v1) for any certbroker server. The empty
 * service name "" stands for the whole server. `setStatus` updates Check answers and pushes
 * the new status to open Watch streams; `shutdown` marks everything NOT_SERVING and ends the
 * streams (call it before draining so load balancers stop sending traffic).
 */
import {
  status as GrpcStatus,
  type Server,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type sendUnaryData,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import {
  HEALTH_PROTO,
  HEALTH_SERVICE,
  WHOLE_SERVER,
  type HealthCheckRequest as CheckRequest,
  type HealthCheckResponse as CheckResponse,
  type ServingStatus,
} from '../protocol/grpc-health.js';
import { loadProtos, lookup } from './proto-load.js';

export { HEALTH_PROTO, type ServingStatus };

export class HealthService {
  readonly #statuses = new Map<string, ServingStatus>();
  readonly #watchers = new Map<string, Set<ServerWritableStream<CheckRequest, CheckResponse>>>();
  #closed = false;

  constructor(initial: Readonly<Record<string, ServingStatus>> = { [WHOLE_SERVER]: 'NOT_SERVING' }) {
    for (const [k, v] of Object.entries(initial)) this.#statuses.set(k, v);
  }

  status(service = WHOLE_SERVER): ServingStatus | undefined {
    return this.#statuses.get(service);
  }

  setStatus(service: string, status: ServingStatus): void {
    if (this.#closed) return;
    const before = this.#statuses.get(service);
    this.#statuses.set(service, status);
    if (before === status) return;
    for (const w of this.#watchers.get(service) ?? []) w.write({ status });
  }

  /** NOT_SERVING everywhere, then ends every Watch stream. */
  shutdown(): void {
    for (const service of this.#statuses.keys()) this.setStatus(service, 'NOT_SERVING');
    this.#closed = true;
    for (const set of this.#watchers.values()) for (const w of set) w.end();
    this.#watchers.clear();
  }

  addToServer(server: Server): void {
    const def = healthServiceDefinition();
    const impl: UntypedServiceImplementation = {
      Check: (call: ServerUnaryCall<CheckRequest, CheckResponse>, cb: sendUnaryData<CheckResponse>) => {
        const s = this.#statuses.get(call.request.service ?? WHOLE_SERVER);
        if (s === undefined) cb({ code: GrpcStatus.NOT_FOUND, details: 'unknown service' });
        else cb(null, { status: s });
      },
      List: (_call: ServerUnaryCall<unknown, unknown>, cb: sendUnaryData<unknown>) => {
        const statuses: Record<string, CheckResponse> = {};
        for (const [k, v] of this.#statuses) statuses[k] = { status: v };
        cb(null, { statuses });
      },
      Watch: (call: ServerWritableStream<CheckRequest, CheckResponse>) => {
        const service = call.request.service ?? WHOLE_SERVER;
        if (this.#closed) {
          call.write({ status: 'NOT_SERVING' });
          call.end();
          return;
        }
        call.write({ status: this.#statuses.get(service) ?? 'SERVICE_UNKNOWN' });
        let set = this.#watchers.get(service);
        if (!set) this.#watchers.set(service, (set = new Set()));
        set.add(call);
        call.on('cancelled', () => set.delete(call));
        call.on('close', () => set.delete(call));
      },
    };
    server.addService(def, impl);
  }
}

export function healthServiceDefinition(): ServiceDefinition {
  const { grpcObject } = loadProtos([HEALTH_PROTO]);
  return lookup<{ service: ServiceDefinition }>(grpcObject, HEALTH_SERVICE).service;
}
