/**
 * The Kubernetes identity form Istio uses: `spiffe://<td>/ns/<namespace>/sa/<serviceaccount>`.
 * Namespace must be a DNS-1123 label and the service account a DNS-1123 subdomain, as the
 * Kubernetes API server requires, so an identity that no pod could carry is rejected early.
 */
import { SpiffeError } from './errors.js';
import { formatSpiffeId, parseSpiffeId, type SpiffeId } from './id.js';

export interface KubernetesIdentity {
  readonly trustDomain: string;
  readonly namespace: string;
  readonly serviceAccount: string;
  /** `spiffe://td/ns/N/sa/S` */
  readonly id: string;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function checkNames(namespace: string, serviceAccount: string): void {
  if (namespace.length > 63 || !DNS_LABEL.test(namespace)) {
    throw new SpiffeError('ERR_SPIFFE_KUBERNETES_NAME', `namespace ${JSON.stringify(namespace)} is not a valid DNS-1123 label`);
  }
  if (serviceAccount.length > 253 || !DNS_SUBDOMAIN.test(serviceAccount)) {
    throw new SpiffeError(
      'ERR_SPIFFE_KUBERNETES_NAME',
      `service account ${JSON.stringify(serviceAccount)} is not a valid DNS-1123 subdomain`,
    );
  }
}

/** `kubernetesIdentity('cluster.local', 'default', 'sleep')` -> `spiffe://cluster.local/ns/default/sa/sleep`. */
export function kubernetesIdentity(trustDomain: string, namespace: string, serviceAccount: string): string {
  checkNames(namespace, serviceAccount);
  return formatSpiffeId(trustDomain, 'ns', namespace, 'sa', serviceAccount).id;
}

/** Parses a Kubernetes-form SPIFFE ID; any other shape is ERR_SPIFFE_ID_NOT_KUBERNETES. */
export function parseKubernetesIdentity(input: string | SpiffeId): KubernetesIdentity {
  const parsed = typeof input === 'string' ? parseSpiffeId(input) : input;
  const segs = parsed.path.split('/');
  // ['', 'ns', N, 'sa', S]
  if (segs.length !== 5 || segs[1] !== 'ns' || segs[3] !== 'sa') {
    throw new SpiffeError('ERR_SPIFFE_ID_NOT_KUBERNETES', 'SPIFFE ID is not of the form spiffe://<td>/ns/<ns>/sa/<sa>');
  }
  const namespace = segs[2]!;
  const serviceAccount = segs[4]!;
  checkNames(namespace, serviceAccount);
  return { trustDomain: parsed.trustDomain, namespace, serviceAccount, id: parsed.id };
}
