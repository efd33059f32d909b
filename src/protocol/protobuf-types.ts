/**
 * google.protobuf well-known types as certbroker's decoders hand them over (protobufjs with the
 * options of src/grpc/service-definitions.ts: `.proto` field names, `oneofs: true`), shared by
 * every message type of this room. Types only: nothing here loads protobufjs.
 */

/** google.protobuf.Value; `kind` names the field that is set (`stringValue`, ...). */
export interface ProtoValue {
  readonly kind?: string;
  readonly stringValue?: string;
  readonly numberValue?: number;
  readonly boolValue?: boolean;
  readonly nullValue?: string | number;
  readonly structValue?: ProtoStruct;
  readonly listValue?: { readonly values?: readonly ProtoValue[] };
}

/** google.protobuf.Struct: `{ fields: { k: { kind: 'stringValue', stringValue: 'x' } } }`. */
export interface ProtoStruct {
  readonly fields?: Readonly<Record<string, ProtoValue>>;
}

/** google.protobuf.Any: the packed message's type URL and its serialized bytes. */
export interface ProtoAny {
  readonly type_url?: string;
  readonly value?: Uint8Array;
}

/** The prefix of every type URL certbroker packs or accepts (`type.googleapis.com/<full.Name>`). */
export const TYPE_URL_PREFIX = 'type.googleapis.com/';

/** The type URL of a message by its full protobuf name (`google.rpc.ErrorInfo`). */
export function typeUrlOf(fullName: string): string {
  return `${TYPE_URL_PREFIX}${fullName}`;
}
