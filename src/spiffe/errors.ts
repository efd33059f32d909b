/** Errors raised by the spiffe domain. Tests assert `code`; messages may name the offending part. */
import { CertbrokerError } from '../core/errors.js';

export type SpiffeErrorCode =
  | 'ERR_SPIFFE_ID_EMPTY'
  | 'ERR_SPIFFE_ID_TOO_LONG'
  | 'ERR_SPIFFE_ID_SCHEME'
  | 'ERR_SPIFFE_ID_TRUST_DOMAIN_MISSING'
  | 'ERR_SPIFFE_ID_TRUST_DOMAIN_CHAR'
  | 'ERR_SPIFFE_ID_TRUST_DOMAIN_TOO_LONG'
  | 'ERR_SPIFFE_ID_USERINFO'
  | 'ERR_SPIFFE_ID_PORT'
  | 'ERR_SPIFFE_ID_QUERY'
  | 'ERR_SPIFFE_ID_FRAGMENT'
  | 'ERR_SPIFFE_ID_PATH_CHAR'
  | 'ERR_SPIFFE_ID_PATH_EMPTY_SEGMENT'
  | 'ERR_SPIFFE_ID_PATH_DOT_SEGMENT'
  | 'ERR_SPIFFE_ID_TRAILING_SLASH'
  | 'ERR_SPIFFE_ID_NOT_KUBERNETES'
  | 'ERR_SPIFFE_KUBERNETES_NAME'
  | 'ERR_SVID_CERT_UNPARSEABLE'
  | 'ERR_SVID_URI_SAN_MISSING'
  | 'ERR_SVID_URI_SAN_MULTIPLE'
  | 'ERR_SVID_ID_INVALID'
  | 'ERR_SVID_LEAF_IS_CA'
  | 'ERR_SVID_LEAF_ID_NO_PATH'
  | 'ERR_SVID_LEAF_EXT_KEY_USAGE'
  | 'ERR_SVID_SIGNING_ID_HAS_PATH'
  | 'ERR_SVID_KEY_USAGE_MISSING'
  | 'ERR_SVID_KEY_USAGE_NOT_CRITICAL'
  | 'ERR_SVID_KEY_USAGE_NO_DIGITAL_SIGNATURE'
  | 'ERR_SVID_LEAF_KEY_CERT_SIGN'
  | 'ERR_SVID_LEAF_CRL_SIGN'
  | 'ERR_SVID_SAN_NOT_CRITICAL'
  | 'ERR_SVID_SIGNING_NOT_CA'
  | 'ERR_SVID_SIGNING_NO_KEY_CERT_SIGN';

export class SpiffeError extends CertbrokerError<SpiffeErrorCode> {
  constructor(code: SpiffeErrorCode, message: string, cause?: unknown) {
    super(code, message, { status: 'invalid-argument', cause, publicMessage: message });
  }
}
