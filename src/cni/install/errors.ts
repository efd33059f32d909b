/**
 * Errors raised by install-cni. Codes are closed; tests assert them.
 */
import { CertbrokerError, type ErrorStatus } from '../../core/errors.js';

export type InstallErrorCode =
  /** A CNI config file is not a usable network config or config list. */
  | 'ERR_CNI_CONFIG_INVALID'
  /** No primary CNI config (yet) in the config dir, or the configured one is missing. */
  | 'ERR_CNI_CONFIG_NOT_FOUND'
  /** The plugin entry we were asked to insert is malformed. */
  | 'ERR_CNI_PLUGIN_ENTRY_INVALID'
  /** The kubeconfig inputs (service host, port, CA, token) are unusable. */
  | 'ERR_KUBECONFIG_INPUT_INVALID'
  /** A source binary to copy does not exist or is not a regular file. */
  | 'ERR_CNI_BINARY_MISSING';

const STATUS: Record<InstallErrorCode, ErrorStatus> = {
  ERR_CNI_CONFIG_INVALID: 'invalid-argument',
  ERR_CNI_CONFIG_NOT_FOUND: 'not-found',
  ERR_CNI_PLUGIN_ENTRY_INVALID: 'invalid-argument',
  ERR_KUBECONFIG_INPUT_INVALID: 'invalid-argument',
  ERR_CNI_BINARY_MISSING: 'not-found',
};

export class InstallError extends CertbrokerError<InstallErrorCode> {
  constructor(code: InstallErrorCode, message: string, cause?: unknown) {
    super(code, message, { status: STATUS[code], cause });
  }
}
