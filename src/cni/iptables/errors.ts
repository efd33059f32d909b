/**
 * Errors raised by istio-iptables: the rule builder (bad configuration is a core `ConfigError`),
 * the applier (a command failed, a binary is missing, the netns is unusable) and the CLI
 * (bad flags, failed validation). Tests assert `code`.
 */
import { CertbrokerError, type ErrorStatus } from '../../core/errors.js';

export type IptablesErrorCode =
  /** A flag or flag value the CLI does not understand (exit code 2). */
  | 'ERR_IPTABLES_FLAGS'
  /** iptables-restore, ip or another command exited non-zero. */
  | 'ERR_IPTABLES_COMMAND'
  /** A needed binary (iptables-restore, ip, nsenter) is not installed. */
  | 'ERR_IPTABLES_BINARY_MISSING'
  /** The network namespace to work in does not exist or cannot be opened. */
  | 'ERR_IPTABLES_NETNS'
  /** resolv.conf could not be read while DNS capture needs its nameservers. */
  | 'ERR_IPTABLES_RESOLV_CONF'
  /** `--run-validation`: traffic to 127.0.0.6 did not reach the capture listener (exit 126). */
  | 'ERR_IPTABLES_VALIDATION';

const STATUS: Record<IptablesErrorCode, ErrorStatus> = {
  ERR_IPTABLES_FLAGS: 'invalid-argument',
  ERR_IPTABLES_COMMAND: 'internal',
  ERR_IPTABLES_BINARY_MISSING: 'failed-precondition',
  ERR_IPTABLES_NETNS: 'failed-precondition',
  ERR_IPTABLES_RESOLV_CONF: 'failed-precondition',
  ERR_IPTABLES_VALIDATION: 'failed-precondition',
};

export class IptablesError extends CertbrokerError<IptablesErrorCode> {
  constructor(code: IptablesErrorCode, message: string, cause?: unknown) {
    super(code, message, { status: STATUS[code], cause });
  }
}
