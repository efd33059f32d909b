/**
 * A pod list page decoded as it streams in, keeping only what node authorization reads of a
 * pod: namespace, name, uid, resourceVersion, spec.serviceAccountName, spec.nodeName and
 * status.phase. A 500-pod page of ~3 KB pods never becomes a 1.5 MB string or an object graph:
 * the response chunks go through the field scanner (src/core/json-field-scanner.ts) and each
 * pod comes out as a slim V1Pod (the shape `slimPod` makes of a whole one, for watch events).
 */
import type { IncomingMessage } from 'node:http';
import type { V1Pod } from '@kubernetes/client-node';
import { JsonFieldScanner, JsonScanError, type ScanRecord } from '../core/json-field-scanner.js';
import { readBody } from './api-request.js';
import { KubeError } from './errors.js';
import type { ListPage } from './list-page.js';

const POD_FIELDS = ['metadata.namespace', 'metadata.name', 'metadata.uid', 'metadata.resourceVersion', 'spec.serviceAccountName', 'spec.nodeName', 'status.phase'];

const SPEC = {
  fields: ['metadata.resourceVersion', 'metadata.continue', ...POD_FIELDS.map((f) => `items.*.${f}`)],
  records: ['items.*'],
  closes: ['metadata'],
};

/** What is kept of a pod (all pods of a cluster may be cached: keep it small). */
export function slimPod(p: V1Pod): V1Pod {
  const m = p.metadata;
  return {
    metadata: { name: m?.name, namespace: m?.namespace, uid: m?.uid, resourceVersion: m?.resourceVersion },
    spec: { containers: [], serviceAccountName: p.spec?.serviceAccountName, nodeName: p.spec?.nodeName },
    status: { phase: p.status?.phase },
  } as V1Pod;
}

function fromRecord(r: ScanRecord): V1Pod {
  return {
    metadata: { name: r['metadata.name'], namespace: r['metadata.namespace'], uid: r['metadata.uid'], resourceVersion: r['metadata.resourceVersion'] },
    spec: { containers: [], serviceAccountName: r['spec.serviceAccountName'], nodeName: r['spec.nodeName'] },
    status: { phase: r['status.phase'] },
  } as V1Pod;
}

/** Scans one pod list body pushed in chunks; `finish()` gives the page. */
export class SlimPodPageDecoder {
  readonly #items: V1Pod[] = [];
  readonly #scanner: JsonFieldScanner;

  /** `onContinue` hears the list's continue token (undefined on the last page) once the list's `metadata` is read, before its items when the server writes them first. */
  constructor(onContinue?: (token: string | undefined) => void) {
    this.#scanner = new JsonFieldScanner(
      SPEC,
      (r) => this.#items.push(fromRecord(r)),
      (path) => {
        if (path === 'metadata') onContinue?.(continueToken(this.#scanner.top));
      },
    );
  }

  push(chunk: Uint8Array): void {
    this.#scanner.push(chunk);
  }

  finish(): ListPage<V1Pod> {
    this.#scanner.end();
    if (!this.#scanner.arrays.has('items')) throw new JsonScanError('the answer has no items', 0);
    const top = this.#scanner.top;
    return { items: this.#items, resourceVersion: top['metadata.resourceVersion'] ?? '', continueToken: continueToken(top) };
  }
}

function continueToken(top: ScanRecord): string | undefined {
  const cont = top['metadata.continue'];
  return cont !== undefined && cont !== '' ? cont : undefined;
}

/** A `PageReader` for pods: the response streamed through `SlimPodPageDecoder`. */
export async function readSlimPodPage(res: IncomingMessage, what: string, signal: AbortSignal, onContinue?: (token: string | undefined) => void): Promise<ListPage<V1Pod>> {
  const decoder = new SlimPodPageDecoder(onContinue);
  let page: ListPage<V1Pod> | undefined;
  const invalid = (err: unknown) =>
    err instanceof JsonScanError ? new KubeError('ERR_KUBE_RESPONSE_INVALID', `${what}: the answer is not JSON (${err.message})`, { status: 'unavailable', cause: err }) : err;
  try {
    await readBody(res, what, signal, (c) => decoder.push(c), () => (page = decoder.finish()));
  } catch (err) {
    throw invalid(err);
  }
  return page!;
}
