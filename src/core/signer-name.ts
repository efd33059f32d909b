/**
 * Kubernetes signer names (`spec.signerName` of CertificateSigningRequests, PodCertificateRequests
 * and ClusterTrustBundles), checked by the kube-apiserver's rule: `<domain>/<path>`, one slash;
 * the domain at most 253 characters of DNS-1123 labels with at least one dot; the path DNS-1123
 * subdomains separated by dots. The devcluster refuses a create with it, the CA and the
 * k8s-signer refuse such a configuration.
 */
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/u;

/** Why `name` is not a valid signer name (the apiserver's wording), or undefined when it is. */
export function signerNameProblem(name: string): string | undefined {
  if (name === '') return 'Required value';
  const segments = name.split('/');
  if (segments.length !== 2) return "must be a fully qualified domain and path of the form 'example.com/signer-name'";
  const [domain, path] = segments as [string, string];
  if (domain.length > 253) return `domain ${JSON.stringify(domain)} must be no more than 253 characters`;
  const labels = domain.split('.');
  const badLabel = labels.find((l) => l.length > 63 || !DNS1123_LABEL.test(l));
  if (badLabel !== undefined) return `validating label ${JSON.stringify(badLabel)}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character`;
  if (labels.length < 2) return `domain ${JSON.stringify(domain)} should be a domain with at least two segments separated by dots`;
  if (path.length > 253 || !DNS1123_SUBDOMAIN.test(path)) return `path ${JSON.stringify(path)} must be a lowercase RFC 1123 subdomain (lower case alphanumeric characters, '-' or '.', at most 253 characters)`;
  return undefined;
}
