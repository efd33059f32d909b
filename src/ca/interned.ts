/** The compact pod index's small building blocks (compact-pod-index.ts): interned strings and growing typed arrays. */

/** Strings to small numbers and back; never forgets (namespaces, accounts, nodes, phases are few). */
export class Interned {
  readonly #ids = new Map<string, number>();
  readonly names: string[] = [];

  id(s: string): number {
    let id = this.#ids.get(s);
    if (id === undefined) {
      id = this.names.length;
      this.names.push(s);
      this.#ids.set(s, id);
    }
    return id;
  }

  find(s: string): number | undefined {
    return this.#ids.get(s);
  }
}

/** `a`, or a copy of it at least twice as long when it is shorter than `need`. */
export function grow<A extends Uint32Array | Uint8Array>(a: A, need: number, make: (n: number) => A): A {
  if (need <= a.length) return a;
  const b = make(Math.max(need, a.length * 2, 1024));
  b.set(a);
  return b;
}
