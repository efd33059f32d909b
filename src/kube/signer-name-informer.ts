/**
 * The informer over one signer's certificate requests (CertificateSigningRequests,
 * PodCertificateRequests): a collection narrowed by the field selector `spec.signerName`,
 * optionally by labels too.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { Informer, type InformerOptions } from './informer.js';

/** An informer's options, minus what the request API fixes (path, field selector), plus whose requests. */
export type SignerNameInformerOptions<T extends KubernetesObject> = Omit<InformerOptions<T>, 'path' | 'fieldSelector'> & { readonly signerName: string };

export function createSignerNameInformer<T extends KubernetesObject>(resource: string, path: string, options: SignerNameInformerOptions<T>): Informer<T> {
  const { signerName, ...rest } = options;
  return new Informer<T>({ resource, ...rest, path, fieldSelector: `spec.signerName=${signerName}` });
}
