/**
 * The `google.rpc.ErrorInfo` every Broker API refusal carries (in `grpc-status-details-bin`,
 * attached by `toGrpcError`).
 *
 * The SPIFFE Broker API (section 4.8) defines three reasons in domain `spiffe.io`; certbroker uses
 * them for exactly the situations of its table:
 *
 * | situation | status | reason |
 * |---|---|---|
 * | reference missing, malformed, of an unsupported type, or the request unreadable | INVALID_ARGUMENT | WORKLOAD_REFERENCE_INVALID |
 * | no such pod on this node (or it was deleted / replaced) | NOT_FOUND | WORKLOAD_NOT_FOUND |
 * | the pod runs here but gets no identity (host network, terminating, finished, the broker itself, no service account) | PERMISSION_DENIED | WORKLOAD_NOT_ENTITLED |
 *
 * Refusals the spec gives a status but no reason (the SPIFFE Broker Endpoint's caller checks,
 * a disabled profile, shutdown) carry an ErrorInfo in certbroker's own domain `certbroker`, with
 * the reason named after the error code (`ERR_CALLER_NOT_AUTHORIZED` -> `CALLER_NOT_AUTHORIZED`).
 * Every ErrorInfo's metadata has `code`: the certbroker error code (`INTERNAL` for an unexpected
 * error).
 */
import type { CertbrokerError } from '../core/errors.js';
import type { ErrorInfo } from '../grpc/rpc-status.js';
import type { BrokerErrorCode } from './errors.js';

export const SPIFFE_ERROR_DOMAIN = 'spiffe.io';
export const CERTBROKER_ERROR_DOMAIN = 'certbroker';

export type SpiffeBrokerReason = 'WORKLOAD_REFERENCE_INVALID' | 'WORKLOAD_NOT_FOUND' | 'WORKLOAD_NOT_ENTITLED';

const SPEC_REASONS: Partial<Record<BrokerErrorCode, SpiffeBrokerReason>> = {
  ERR_WORKLOAD_REFERENCE_INVALID: 'WORKLOAD_REFERENCE_INVALID',
  ERR_REQUEST_MALFORMED: 'WORKLOAD_REFERENCE_INVALID',
  ERR_WORKLOAD_NOT_FOUND: 'WORKLOAD_NOT_FOUND',
  ERR_WORKLOAD_GONE: 'WORKLOAD_NOT_FOUND',
  ERR_WORKLOAD_NOT_ENTITLED: 'WORKLOAD_NOT_ENTITLED',
};

/** The ErrorInfo for a Broker API refusal (`undefined`: an unexpected error, answered INTERNAL). */
export function brokerApiErrorInfo(err: CertbrokerError | undefined): ErrorInfo {
  if (!err) return { reason: 'INTERNAL', domain: CERTBROKER_ERROR_DOMAIN, metadata: { code: 'INTERNAL' } };
  const spec = SPEC_REASONS[err.code as BrokerErrorCode];
  if (spec) return { reason: spec, domain: SPIFFE_ERROR_DOMAIN, metadata: { code: err.code } };
  return { reason: err.code.replace(/^ERR_/, ''), domain: CERTBROKER_ERROR_DOMAIN, metadata: { code: err.code } };
}
