/**
 * Workload references of the SPIFFE Broker API: a `google.protobuf.Any` packing either a
 * `KubernetesObjectReference` to a core pod (by UID, by namespace/name, or both) or a
 * `WorkloadPIDReference` (a positive PID), with the type URL of the final spec (`spiffe.broker.*`)
 * or of go-spiffe / ztunnel#1936 (`spiffe.reference.*`): same fields and numbers, each decoded
 * with its own message type (src/protocol/spiffe-broker.ts `REFERENCE_TYPES`).
 */
import type protobuf from 'protobufjs';
import { protobufRoot } from '../../../grpc/proto-load.js';
import { decodeStrict } from '../../../grpc/strict-decode.js';
import type { ProtoAny } from '../../../protocol/protobuf-types.js';
import {
  KUBERNETES_POD_TYPE,
  KUBERNETES_REFERENCE_TYPE,
  KUBERNETES_REFERENCE_TYPE_URL,
  PID_REFERENCE_TYPE,
  PID_REFERENCE_TYPE_URL,
  REFERENCE_TYPES,
  type KubernetesObjectReference,
  type ReferenceKind,
  type WorkloadPIDReference,
} from '../../../protocol/spiffe-broker.js';
import { BrokerError } from '../../errors.js';
import { brokerMessageType } from './broker-proto.js';

/** A decoded pod reference; at least one of `uid` or `namespace`+`name` is set. */
export interface PodReference {
  readonly uid: string | undefined;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
}

/** A decoded reference of either kind, with the type URL it came with. */
export type WorkloadRef =
  | ({ readonly kind: 'kubernetes'; readonly typeUrl: string } & PodReference)
  | { readonly kind: 'pid'; readonly typeUrl: string; readonly pid: number };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function invalid(message: string): BrokerError {
  return new BrokerError('ERR_WORKLOAD_REFERENCE_INVALID', message, { status: 'invalid-argument', publicMessage: message });
}

/** Bytes that are not well-formed protobuf, inside `Any.value` as anywhere else in the request. */
function malformed(message: string): BrokerError {
  return new BrokerError('ERR_REQUEST_MALFORMED', message, { status: 'invalid-argument', publicMessage: `request cannot be read: ${message}` });
}

function messageType(proto: string, type: string): protobuf.Type {
  return protobufRoot([proto]).lookupType(type);
}

/**
 * Decodes and validates a reference of any accepted type. A reference that is missing, of a type
 * not supported, or that decodes to values that name no pod (a uid that is not a UUID, pid 0) is
 * ERR_WORKLOAD_REFERENCE_INVALID with a precise reason. Packed bytes that are not well-formed
 * protobuf of the type (decoded strictly: a uid declared 36 bytes with 3 present, a string that is
 * not UTF-8) are ERR_REQUEST_MALFORMED, the code of every undecodable part of a request: a broken
 * encoder, logged, whether the damage sits in the request message or inside `Any.value`. Both are
 * INVALID_ARGUMENT with the spec's reason WORKLOAD_REFERENCE_INVALID (SPIFFE Broker API 4.8: "the
 * request omits the reference, or the reference is malformed or invalid").
 */
export function parseReference(reference: ProtoAny | null | undefined): WorkloadRef {
  if (!reference || !reference.type_url) throw invalid('workload reference is missing');
  const typeUrl = reference.type_url;
  const info = REFERENCE_TYPES[typeUrl];
  if (!info) throw invalid(`unsupported workload reference type ${JSON.stringify(typeUrl.slice(0, 200))} (want one of ${Object.keys(REFERENCE_TYPES).join(', ')})`);
  let decoded: unknown;
  try {
    const type = messageType(info.proto, info.type);
    decoded = type.toObject(decodeStrict(type, reference.value ?? new Uint8Array()));
  } catch {
    throw malformed(`workload reference does not decode as a ${info.type}`);
  }
  if (info.kind === 'pid') {
    const pid = (decoded as WorkloadPIDReference).pid ?? 0;
    if (!Number.isSafeInteger(pid) || pid <= 0) throw invalid('pid must be a positive integer');
    return { kind: 'pid', typeUrl, pid };
  }
  return { kind: 'kubernetes', typeUrl, ...podReferenceOf(decoded as KubernetesObjectReference) };
}

function podReferenceOf(decoded: KubernetesObjectReference): PodReference {
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

/** Packs a pod reference into the Any a client sends (for `certbroker fetch`, tests and benchmarks); `typeUrl` picks the package. */
export function encodePodReference(ref: Partial<PodReference>, typeUrl: string = KUBERNETES_REFERENCE_TYPE_URL): Required<ProtoAny> {
  const info = REFERENCE_TYPES[typeUrl];
  const type = info?.kind === 'kubernetes' ? messageType(info.proto, info.type) : brokerMessageType(KUBERNETES_REFERENCE_TYPE);
  const message = type.fromObject({
    type: { ...KUBERNETES_POD_TYPE },
    ...(ref.namespace !== undefined || ref.name !== undefined ? { key: { namespace: ref.namespace ?? '', name: ref.name ?? '' } } : {}),
    ...(ref.uid !== undefined ? { uid: ref.uid } : {}),
  });
  return { type_url: typeUrl, value: Buffer.from(type.encode(message).finish()) };
}

/** Packs a PID reference (tests, benchmarks); `typeUrl` picks the package. */
export function encodePidReference(pid: number, typeUrl: string = PID_REFERENCE_TYPE_URL): Required<ProtoAny> {
  const info = REFERENCE_TYPES[typeUrl];
  const type = info?.kind === 'pid' ? messageType(info.proto, info.type) : brokerMessageType(PID_REFERENCE_TYPE);
  return { type_url: typeUrl, value: Buffer.from(type.encode(type.fromObject({ pid })).finish()) };
}

export function describePodReference(ref: PodReference): string {
  const key = ref.name !== undefined ? `${ref.namespace}/${ref.name}` : '';
  return [key, ref.uid !== undefined ? `uid=${ref.uid}` : ''].filter((s) => s !== '').join(' ');
}

export type { ReferenceKind };
