/**
 * google.protobuf.Struct as the grpc-js definitions decode it (src/grpc/service-definitions.ts, `oneofs: true`):
 * `{ fields: { k: { kind: 'stringValue', stringValue: 'x' } } }`. These helpers convert the
 * string-valued entries certbroker uses (e.g. `ImpersonatedIdentity`) to and from plain objects.
 */

import type { ProtoStruct, ProtoValue } from '../protocol/protobuf-types.js';

export type { ProtoStruct, ProtoValue };

/** The string under `key`, undefined when absent; throws when present but not a string. */
export function structString(struct: ProtoStruct | null | undefined, key: string): string | undefined {
  const v = struct?.fields?.[key];
  if (v === undefined) return undefined;
  if (typeof v.stringValue === 'string' && (v.kind === undefined || v.kind === 'stringValue')) return v.stringValue;
  throw new TypeError(`metadata field ${key} must be a string`);
}

/** A Struct holding only string values, for clients. */
export function stringStruct(entries: Readonly<Record<string, string>>): ProtoStruct {
  const fields: Record<string, ProtoValue> = {};
  for (const [k, v] of Object.entries(entries)) fields[k] = { stringValue: v };
  return { fields };
}
