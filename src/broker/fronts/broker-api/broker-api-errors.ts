/**
 * The `google.rpc.ErrorInfo` every Broker API refusal carries (in `grpc-status-details-bin`,
 * attached by `toGrpcError`).
 *
 * The SPIFFE Broker API (section 4.8) defines three reasons in domain `spiffe.io`; certbroker uses
 * them for exactly the situations of its table:
 *
 * | situation | status | reason |
 * |---|---|---|
 * | reference missing, of an unsupported type, or naming nothing valid (ERR_WORKLOAD_REFERENCE_INVALID); the request or the reference's bytes not well-formed (ERR_REQUEST_MALFORMED) | INVALID_ARGUMENT | WORKLOAD_REFERENCE_INVALID |
 * | no such pod on this node (or it was deleted / replaced) | NOT_FOUND | WORKLOAD_NOT_FOUND |
 * | the pod runs here but gets no identity (host network, terminating, finished, the broker itself, no service account) | PERMISSION_DENIED | WORKLOAD_NOT_ENTITLED |
 *
 * Refusals the spec gives a status but no reason (the SPIFFE Broker Endpoint's caller checks,
 * a disabled profile, shutdown) carry an ErrorInfo in certbroker's own domain `certbroker`, with
 * the reason named after the error code (`ERR_CALLER_NOT_AUTHORIZED` -> `CALLER_NOT_AUTHORIZED`).
 * Every ErrorInfo's metadata has `code`: the certbroker error code (`INTERNAL` for an unexpected
 * error).
 */
import type { CertbrokerError } from '../../../core/errors.js';
import { CERTBROKER_ERROR_DOMAIN, type ErrorInfo } from '../../../protocol/grpc-status.js';
import { SPIFFE_BROKER_REASON, SPIFFE_ERROR_DOMAIN, type SpiffeBrokerReason } from '../../../protocol/spiffe-broker.js';
import type { BrokerErrorCode } from '../../errors.js';

const SPEC_REASONS: Partial<Record<BrokerErrorCode, SpiffeBrokerReason>> = {
  ERR_WORKLOAD_REFERENCE_INVALID: SPIFFE_BROKER_REASON.workloadReferenceInvalid,
  ERR_REQUEST_MALFORMED: SPIFFE_BROKER_REASON.workloadReferenceInvalid,
  ERR_WORKLOAD_NOT_FOUND: SPIFFE_BROKER_REASON.workloadNotFound,
  ERR_WORKLOAD_GONE: SPIFFE_BROKER_REASON.workloadNotFound,
  ERR_WORKLOAD_NOT_ENTITLED: SPIFFE_BROKER_REASON.workloadNotEntitled,
};

/** The ErrorInfo for a Broker API refusal (`undefined`: an unexpected error, answered INTERNAL). */
export function brokerApiErrorInfo(err: CertbrokerError | undefined): ErrorInfo {
  if (!err) return { reason: 'INTERNAL', domain: CERTBROKER_ERROR_DOMAIN, metadata: { code: 'INTERNAL' } };
  const spec = SPEC_REASONS[err.code as BrokerErrorCode];
  if (spec) return { reason: spec, domain: SPIFFE_ERROR_DOMAIN, metadata: { code: err.code } };
  return { reason: err.code.replace(/^ERR_/, ''), domain: CERTBROKER_ERROR_DOMAIN, metadata: { code: err.code } };
}
