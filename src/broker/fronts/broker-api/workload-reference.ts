/**
 * Workload references of the SPIFFE Broker API: a `google.protobuf.Any` that must pack a
 * `KubernetesObjectReference` to a core pod, by UID, by namespace/name, or both.
 */
import type { ProtoAny } from '../../../protocol/protobuf-types.js';
import {
  KUBERNETES_POD_TYPE,
  KUBERNETES_REFERENCE_TYPE,
  KUBERNETES_REFERENCE_TYPE_URL,
  KUBERNETES_REFERENCE_TYPE_URLS,
  type KubernetesObjectReference,
} from '../../../protocol/spiffe-broker.js';
import { BrokerError } from '../../errors.js';
import { brokerMessageType } from './broker-proto.js';

/** A decoded pod reference; at least one of `uid` or `namespace`+`name` is set. */
export interface PodReference {
  readonly uid: string | undefined;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function invalid(message: string): BrokerError {
  return new BrokerError('ERR_WORKLOAD_REFERENCE_INVALID', message, { status: 'invalid-argument', publicMessage: message });
}

/** Decodes and validates a workload reference; throws ERR_WORKLOAD_REFERENCE_INVALID with a precise reason. */
export function parseWorkloadReference(reference: ProtoAny | null | undefined): PodReference {
  if (!reference || !reference.type_url) throw invalid('workload reference is missing');
  if (!KUBERNETES_REFERENCE_TYPE_URLS.includes(reference.type_url)) {
    throw invalid(`unsupported workload reference type ${JSON.stringify(reference.type_url)} (want ${KUBERNETES_REFERENCE_TYPE_URL})`);
  }
  let decoded: KubernetesObjectReference;
  try {
    const type = brokerMessageType(KUBERNETES_REFERENCE_TYPE);
    decoded = type.toObject(type.decode(reference.value ?? new Uint8Array())) as KubernetesObjectReference;
  } catch {
    throw invalid('workload reference does not decode as a KubernetesObjectReference');
  }
  const plural = decoded.type?.plural ?? '';
  const group = decoded.type?.group ?? '';
  if (plural !== KUBERNETES_POD_TYPE.plural || group !== KUBERNETES_POD_TYPE.group) {
    throw invalid(
      `unsupported Kubernetes object type ${JSON.stringify(`${plural}.${group}`)} (want ${KUBERNETES_POD_TYPE.plural} in group ${KUBERNETES_POD_TYPE.group})`,
    );
  }
  const uid = decoded.uid ? decoded.uid : undefined;
  const namespace = decoded.key?.namespace ? decoded.key.namespace : undefined;
  const name = decoded.key?.name ? decoded.key.name : undefined;
  if (uid !== undefined && !UUID.test(uid)) throw invalid('uid is not a UUID');
  if ((namespace === undefined) !== (name === undefined)) throw invalid('key needs both namespace and name');
  if (uid === undefined && name === undefined) throw invalid('reference needs a uid or a key');
  if (namespace !== undefined && (namespace.length > 63 || !DNS_LABEL.test(namespace))) throw invalid('key.namespace is not a valid namespace name');
  if (name !== undefined && (name.length > 253 || !DNS_SUBDOMAIN.test(name))) throw invalid('key.name is not a valid pod name');
  return { uid, namespace, name };
}

/** Packs a pod reference into the Any a client sends (for `certbroker fetch`, tests and benchmarks). */
export function encodePodReference(ref: Partial<PodReference>): Required<ProtoAny> {
  const type = brokerMessageType(KUBERNETES_REFERENCE_TYPE);
  const message = type.fromObject({
    type: { ...KUBERNETES_POD_TYPE },
    ...(ref.namespace !== undefined || ref.name !== undefined ? { key: { namespace: ref.namespace ?? '', name: ref.name ?? '' } } : {}),
    ...(ref.uid !== undefined ? { uid: ref.uid } : {}),
  });
  return { type_url: KUBERNETES_REFERENCE_TYPE_URL, value: Buffer.from(type.encode(message).finish()) };
}

export function describePodReference(ref: PodReference): string {
  const key = ref.name !== undefined ? `${ref.namespace}/${ref.name}` : '';
  return [key, ref.uid !== undefined ? `uid=${ref.uid}` : ''].filter((s) => s !== '').join(' ');
}
