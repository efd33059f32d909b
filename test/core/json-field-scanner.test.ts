/**
 * The streaming field scanner gives the same wanted fields as JSON.parse for many document
 * shapes (escapes, unicode, unknown and nested fields, empty containers, literals) however the
 * bytes are split, and refuses malformed or truncated documents.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { JsonFieldScanner, JsonScanError, type ScanRecord, type ScanSpec } from '../../src/core/json-field-scanner.js';
import { seededRng } from '../support/seeded-rng.js';

const SPEC: ScanSpec = {
  fields: ['metadata.resourceVersion', 'metadata.continue', 'items.*.metadata.name', 'items.*.metadata.namespace', 'items.*.spec.nodeName', 'items.*.status.phase'],
  records: ['items.*'],
};

/** What the scanner should find, by JSON.parse. */
function expected(doc: unknown): { top: ScanRecord; records: ScanRecord[] } {
  const top: ScanRecord = {};
  const d = doc as { metadata?: Record<string, unknown>; items?: unknown[] };
  for (const k of ['resourceVersion', 'continue']) if (typeof d.metadata?.[k] === 'string') top[`metadata.${k}`] = d.metadata[k] as string;
  const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);
  const records = (Array.isArray(d.items) ? d.items : []).filter(isObject).map((it) => {
    const r: ScanRecord = {};
    const o = (it ?? {}) as Record<string, Record<string, unknown> | undefined>;
    const pick = (a: string, b: string) => {
      const v = typeof o[a] === 'object' && o[a] !== null && !Array.isArray(o[a]) ? o[a]![b] : undefined;
      if (typeof v === 'string') r[`${a}.${b}`] = v;
    };
    pick('metadata', 'name');
    pick('metadata', 'namespace');
    pick('spec', 'nodeName');
    pick('status', 'phase');
    return r;
  });
  return { top, records };
}

function scan(bytes: Buffer, cuts: number[]): { top: ScanRecord; records: ScanRecord[] } {
  const records: ScanRecord[] = [];
  const s = new JsonFieldScanner(SPEC, (r) => records.push(r));
  let at = 0;
  for (const c of [...cuts, bytes.length]) {
    s.push(bytes.subarray(at, c));
    at = c;
  }
  s.end();
  return { top: s.top, records };
}

const SHAPES: unknown[] = [
  { kind: 'PodList', metadata: { resourceVersion: '12', continue: 'eyJ9' }, items: [] },
  { items: [{ metadata: { name: 'a', namespace: 'n' }, spec: { nodeName: 'node-1' }, status: { phase: 'Running' } }] },
  {
    metadata: { resourceVersion: 'r"\\/\b\f\n\r\t', extra: { deep: [[{ name: 'not-me' }]] } },
    items: [
      { metadata: { name: 'ünïcødé-名前-😀', namespace: 'ns\u0001\u001f', labels: { 'metadata.name': 'x', name: 'y' } }, spec: { containers: [{ name: 'c', args: ['{', '}', '[', ']', '"', '\\'] }], nodeName: '' } },
      { metadata: {}, spec: null, status: 'Running' },
      { metadata: { name: 7, namespace: null, uid: true }, spec: { nodeName: ['x'] }, status: { phase: { nested: 'Failed' } } },
      {},
      { status: { phase: 'Succeeded', conditions: [] }, metadata: { namespace: 'late-first', name: 'z' } },
    ],
    after: [1, -2.5e10, true, false, null, {}, [], ''],
  },
  { items: [{ metadata: { name: '\ud800 lone surrogate \udfff', namespace: 'a' } }], metadata: { resourceVersion: '99' } },
  { unknown: { items: [{ metadata: { name: 'nested-items-are-not-items' } }] }, items: [{ metadata: { name: 'x' } }] },
];

test('the scanned fields equal JSON.parse for every shape, split at every byte offset', () => {
  for (const doc of SHAPES) {
    const text = JSON.stringify(doc, null, doc === SHAPES[2] ? 2 : undefined);
    const bytes = Buffer.from(text, 'utf8');
    const want = expected(doc);
    assert.deepEqual(scan(bytes, []), want, text);
    for (let cut = 1; cut < bytes.length; cut++) assert.deepEqual(scan(bytes, [cut]), want, `${text} cut at ${cut}`);
    assert.deepEqual(scan(bytes, Array.from({ length: bytes.length - 1 }, (_, i) => i + 1)), want, `${text} byte by byte`);
  }
});

test('escapes written by hand (\\u escapes, escaped quotes) decode as JSON.parse decodes them', () => {
  const text = '{"items":[{"metadata":{"name":"a\\u0041\\u00e9\\ud83d\\ude00\\"q\\"","namespace":"\\/x"}}]}';
  const want = expected(JSON.parse(text));
  const bytes = Buffer.from(text);
  for (let cut = 1; cut < bytes.length; cut++) assert.deepEqual(scan(bytes, [cut]), want, `cut at ${cut}`);
  assert.equal(want.records[0]!['metadata.name'], 'aAé😀"q"');
});

test('random documents agree with JSON.parse under random splits (seeded)', () => {
  const rng = seededRng(42);
  const pickStr = () => ['', 'a', 'Running', 'é', '"', '\\', '😀', '\n', 'x'.repeat(40)][Math.floor(rng() * 9)]!;
  const value = (depth: number): unknown => {
    const r = rng();
    if (depth > 3 || r < 0.3) return pickStr();
    if (r < 0.4) return Math.floor(rng() * 1000) - 500;
    if (r < 0.45) return [true, false, null][Math.floor(rng() * 3)];
    if (r < 0.7) return Array.from({ length: Math.floor(rng() * 4) }, () => value(depth + 1));
    const o: Record<string, unknown> = {};
    for (const k of ['name', 'namespace', 'nodeName', 'phase', 'metadata', 'spec', 'status', 'other']) if (rng() < 0.4) o[k] = value(depth + 1);
    return o;
  };
  for (let n = 0; n < 300; n++) {
    const doc = { metadata: value(1), items: Array.from({ length: Math.floor(rng() * 5) }, () => value(1)), tail: value(1) };
    const bytes = Buffer.from(JSON.stringify(doc));
    const cuts: number[] = [];
    for (let at = 0; at < bytes.length; at += 1 + Math.floor(rng() * 7)) if (at > 0) cuts.push(at);
    assert.deepEqual(scan(bytes, cuts), expected(doc), `document ${n}: ${bytes.toString()}`);
  }
});

test('malformed and truncated documents are refused', () => {
  const bad = ['', '{', '{"items":[', '{"items":[{"metadata":{"name":"a"}}]', '{"a" 1}', '{"a":1,}x', '{"a":1}}', '[1 2]', '{"items":[{"metadata":{"name":"\\x"}}]}', '{"items":[{"metadata":{"name":"\\u12"}}]}', '{"a":1} {"b":2}', '{"a":@}', '{"items":[{"metadata":{"name":"b\nc"}}]}'];
  for (const text of bad) {
    assert.throws(() => scan(Buffer.from(text), []), (err: unknown) => err instanceof JsonScanError && err.code === 'ERR_JSON_MALFORMED' && err.status === 'invalid-argument', text);
  }
});

test('keys are matched whether written plainly, escaped or split: escaped keys name the same fields as JSON.parse reads them', () => {
  const text = '{"\\u006detadata":{"resourceVersion":"7"},"items":[{"meta\\u0064ata":{"n\\u0061me":"a","namespace":"n"},"spec":{"node\\u004eame":"x","nodeNam":"no","nodeNamee":"no"},"st\\"atus":{"phase":"not-me"}}]}';
  const bytes = Buffer.from(text);
  const want = expected(JSON.parse(text));
  assert.deepEqual(want.records, [{ 'metadata.name': 'a', 'metadata.namespace': 'n', 'spec.nodeName': 'x' }]);
  assert.deepEqual(scan(bytes, []), want);
  for (let cut = 1; cut < bytes.length; cut++) assert.deepEqual(scan(bytes, [cut]), want, `cut at ${cut}`);
});

test('onClose hears a watched container end as soon as its bytes are in (a list metadata before its items)', () => {
  const closed: Array<[string, ScanRecord]> = [];
  const s = new JsonFieldScanner({ ...SPEC, closes: ['metadata'] }, () => undefined, (path) => closed.push([path, { ...s.top }]));
  const head = '{"metadata":{"resourceVersion":"5","continue":"abc"},"items":[';
  s.push(Buffer.from(head));
  assert.deepEqual(closed, [['metadata', { 'metadata.resourceVersion': '5', 'metadata.continue': 'abc' }]], 'told before any item arrived');
  s.push(Buffer.from('{"metadata":{"name":"p","namespace":"n"}}]}'));
  s.end();
  assert.equal(closed.length, 1, 'items.*.metadata is not the watched path');
});
