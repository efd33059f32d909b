/**
 * spiffe — SPIFFE IDs and X509-SVID rules. Pure; no I/O.
 *
 * IDs:
 * - `parseSpiffeId(s): SpiffeId` ({trustDomain, path, id}); throws `SpiffeError` with an
 *   `ERR_SPIFFE_ID_*` code (scheme, trust-domain char, path char, empty/dot segment, trailing
 *   slash, query, fragment, port, userinfo, too long).
 * - `formatSpiffeId(td, ...segments): SpiffeId`, `isSpiffeId(s)`, `validateTrustDomain(td)`,
 *   `validatePath(path)`.
 * - `kubernetesIdentity(td, ns, sa): string` -> `spiffe://td/ns/ns/sa/sa`;
 *   `parseKubernetesIdentity(id): KubernetesIdentity` ({trustDomain, namespace, serviceAccount, id});
 *   a non-Kubernetes shape is `ERR_SPIFFE_ID_NOT_KUBERNETES`, bad names `ERR_SPIFFE_KUBERNETES_NAME`.
 *
 * X509-SVID:
 * - `x509SvidProblems(cert, {role})` -> {spiffeId, problems[]}: every violated rule as a coded
 *   `SpiffeError` (`ERR_SVID_*`); `cert` is a @peculiar/x509 `X509Certificate`, DER bytes or PEM.
 * - `checkX509Svid(cert, {role})` returns the SPIFFE ID or throws the first problem.
 *   role 'leaf' (default) or 'signing' (CA certs in the chain).
 * - `x509SvidChainProblems([leaf, ...cas])`: leaf rules on the first, signing rules on the rest.
 */
export { SpiffeError, type SpiffeErrorCode } from './errors.js';
export {
  SPIFFE_ID_MAX_LENGTH,
  SPIFFE_SCHEME_PREFIX,
  TRUST_DOMAIN_MAX_LENGTH,
  formatSpiffeId,
  isSpiffeId,
  parseSpiffeId,
  validatePath,
  validateTrustDomain,
  type SpiffeId,
} from './id.js';
export { kubernetesIdentity, parseKubernetesIdentity, type KubernetesIdentity } from './kubernetes.js';
export {
  checkX509Svid,
  x509SvidChainProblems,
  x509SvidProblems,
  type SvidCheckOptions,
  type SvidCheckResult,
  type SvidRole,
} from './x509-svid.js';
