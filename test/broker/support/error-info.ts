/**
 * Reads the google.rpc.Status a grpc-js client received in `grpc-status-details-bin` (decoded
 * with protobufjs over proto/google/rpc), for assertions on a Broker API refusal.
 */
import type { ServiceError } from '@grpc/grpc-js';
import { decodeRpcStatus, STATUS_DETAILS_KEY, type RpcStatus } from '../../../src/grpc/rpc-status.js';

export function rpcStatusOf(err: unknown): RpcStatus | undefined {
  const value = (err as ServiceError).metadata?.get(STATUS_DETAILS_KEY)[0];
  return Buffer.isBuffer(value) ? decodeRpcStatus(value) : undefined;
}

/** A predicate for assert.rejects: the gRPC code, and an ErrorInfo with `reason` in `domain` whose Status repeats code and message. */
export function refusedWith(code: number, reason: string, domain = 'spiffe.io'): (err: unknown) => boolean {
  return (err: unknown) => {
    const e = err as ServiceError;
    const st = rpcStatusOf(e);
    if (e.code !== code || !st) throw new Error(`want code ${code} with details, got ${e.code} ${e.details} (details ${st ? 'present' : 'absent'})`);
    if (st.code !== code || st.message !== e.details) throw new Error(`Status ${st.code} "${st.message}" differs from ${e.code} "${e.details}"`);
    if (st.errorInfo?.reason !== reason || st.errorInfo.domain !== domain) throw new Error(`ErrorInfo ${JSON.stringify(st.errorInfo)}, want ${domain} ${reason}`);
    return true;
  };
}
