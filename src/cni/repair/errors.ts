/** The repair controller's error codes (a failed label or delete, retries used up), each with its status. */
import { CertbrokerError, type ErrorStatus } from '../../core/errors.js';

export type RepairErrorCode =
  /** The API server refused or failed a label/delete; retried with backoff. */
  | 'ERR_REPAIR_ACTION_FAILED'
  /** Retries used up for one pod; it is left until its next change. */
  | 'ERR_REPAIR_RETRIES_EXHAUSTED';

const STATUS: Record<RepairErrorCode, ErrorStatus> = {
  ERR_REPAIR_ACTION_FAILED: 'unavailable',
  ERR_REPAIR_RETRIES_EXHAUSTED: 'resource-exhausted',
};

export class RepairError extends CertbrokerError<RepairErrorCode> {
  constructor(code: RepairErrorCode, message: string, cause?: unknown) {
    super(code, message, { status: STATUS[code], cause });
  }
}
