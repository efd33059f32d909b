/** Errors of the Kubernetes adapters. */
import { CertbrokerError, type ErrorStatus } from '../core/errors.js';

export type KubeErrorCode = 'ERR_KUBE_CONFIG_INVALID' | 'ERR_KUBE_INFORMER_STOPPED';

export class KubeError extends CertbrokerError<KubeErrorCode> {
  constructor(code: KubeErrorCode, message: string, options: { status: ErrorStatus; cause?: unknown }) {
    super(code, message, options);
  }
}
