/** The wanted paths of the streaming field scanner (json-field-scanner.ts) as a tree, and keys matched against it on their raw bytes. */

export interface PathNode {
  readonly path: string;
  readonly children: Map<string, PathNode>;
  /** The name the value is kept under (the wanted path itself). */
  field: string | undefined;
  record: boolean;
  /** `onClose` is told when a container at this path closes. */
  notify: boolean;
  /** The children by key as UTF-8 bytes (not `*`): a key without escapes is matched on its raw bytes, never decoded. */
  keyed: ReadonlyArray<{ readonly bytes: Uint8Array; readonly node: PathNode }>;
}

export function node(path: string): PathNode {
  return { path, children: new Map(), field: undefined, record: false, notify: false, keyed: [] };
}

export function indexKeys(n: PathNode): void {
  n.keyed = [...n.children].filter(([k]) => k !== '*').map(([k, c]) => ({ bytes: Buffer.from(k, 'utf8'), node: c }));
  for (const c of n.children.values()) indexKeys(c);
}

/** The child of `n` whose key is `chunk[from, to)` (raw bytes of a key without escapes). */
export function childAt(n: PathNode, chunk: Uint8Array, from: number, to: number): PathNode | undefined {
  const len = to - from;
  next: for (const k of n.keyed) {
    const b = k.bytes;
    if (b.length !== len) continue;
    for (let j = 0; j < len; j++) if (chunk[from + j] !== b[j]) continue next;
    return k.node;
  }
  return undefined;
}
