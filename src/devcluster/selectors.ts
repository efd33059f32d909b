/**
 * labelSelector and fieldSelector as the API server parses them. A selector that does not parse
 * (or names a field the resource does not index) is a 400 BadRequest, never a crash.
 */
import { badRequest } from './status.js';

export type Labels = Readonly<Record<string, string>>;

type LabelRequirement =
  | { readonly op: 'eq' | 'ne'; readonly key: string; readonly value: string }
  | { readonly op: 'in' | 'notin'; readonly key: string; readonly values: readonly string[] }
  | { readonly op: 'exists' | 'notexists'; readonly key: string };

export type LabelSelector = readonly LabelRequirement[];

const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/** Splits on commas that are not inside parentheses. */
function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

function checkKey(key: string, raw: string): string {
  if (!LABEL_KEY.test(key)) throw badRequest(`unable to parse requirement: invalid label key "${key}" in "${raw}"`);
  return key;
}

function checkValue(value: string, raw: string): string {
  if (!LABEL_VALUE.test(value) || value.length > 63) {
    throw badRequest(`unable to parse requirement: invalid label value "${value}" in "${raw}"`);
  }
  return value;
}

export function parseLabelSelector(raw: string | undefined): LabelSelector {
  if (raw === undefined || raw.trim() === '') return [];
  const reqs: LabelRequirement[] = [];
  for (const part of splitTopLevel(raw)) {
    let m = /^!\s*([^\s=!(),]+)$/.exec(part);
    if (m) {
      reqs.push({ op: 'notexists', key: checkKey(m[1]!, raw) });
      continue;
    }
    m = /^([^\s=!(),]+)\s+(in|notin)\s+\(([^()]*)\)$/.exec(part);
    if (m) {
      const values = m[3]!.split(',').map((v) => v.trim()).filter((v) => v !== '').map((v) => checkValue(v, raw));
      reqs.push({ op: m[2] as 'in' | 'notin', key: checkKey(m[1]!, raw), values });
      continue;
    }
    m = /^([^\s=!(),]+)\s*(==|=|!=)\s*([^\s=!(),]*)$/.exec(part);
    if (m) {
      reqs.push({ op: m[2] === '!=' ? 'ne' : 'eq', key: checkKey(m[1]!, raw), value: checkValue(m[3]!, raw) });
      continue;
    }
    m = /^([^\s=!(),]+)$/.exec(part);
    if (m) {
      reqs.push({ op: 'exists', key: checkKey(m[1]!, raw) });
      continue;
    }
    throw badRequest(`unable to parse requirement: couldn't parse the selector string "${raw}"`);
  }
  return reqs;
}

export function matchesLabels(selector: LabelSelector, labels: Labels | undefined): boolean {
  const l = labels ?? {};
  return selector.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(l, r.key);
    switch (r.op) {
      case 'eq':
        return has && l[r.key] === r.value;
      case 'ne':
        return !has || l[r.key] !== r.value;
      case 'in':
        return has && r.values.includes(l[r.key]!);
      case 'notin':
        return !has || !r.values.includes(l[r.key]!);
      case 'exists':
        return has;
      case 'notexists':
        return !has;
    }
  });
}

export interface FieldRequirement {
  readonly field: string;
  readonly op: 'eq' | 'ne';
  readonly value: string;
}

export type FieldSelector = readonly FieldRequirement[];

/** Parses `a=b,c!=d`; `allowed` is the resource's indexed fields (metadata.* always allowed). */
export function parseFieldSelector(raw: string | undefined, allowed: readonly string[]): FieldSelector {
  if (raw === undefined || raw.trim() === '') return [];
  const out: FieldRequirement[] = [];
  for (const part of raw.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const m = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(part);
    if (!m) throw badRequest(`invalid selector: '${raw}'; can't understand '${part}'`);
    const field = m[1]!;
    if (field !== 'metadata.name' && field !== 'metadata.namespace' && !allowed.includes(field)) {
      throw badRequest(`field label not supported: ${field}`);
    }
    out.push({ field, op: m[2] === '!=' ? 'ne' : 'eq', value: m[3]!.trim() });
  }
  return out;
}

/** A field's value as the API server's field-label conversion renders it (strings, booleans as text). */
export function fieldValue(obj: unknown, path: string): string {
  let cur: unknown = obj;
  for (const seg of path.split('.')) {
    if (cur === null || typeof cur !== 'object') return '';
    cur = (cur as Record<string, unknown>)[seg];
  }
  if (cur === undefined || cur === null) return path === 'spec.hostNetwork' || path === 'spec.unschedulable' ? 'false' : '';
  return typeof cur === 'object' ? JSON.stringify(cur) : String(cur);
}

export function matchesFields(selector: FieldSelector, obj: unknown): boolean {
  return selector.every((r) => {
    const v = fieldValue(obj, r.field);
    return r.op === 'eq' ? v === r.value : v !== r.value;
  });
}
