/**
 * labelSelector and fieldSelector as the API server parses them. A selector that does not parse
 * (or names a field the resource does not index) is a 400 BadRequest, never a crash.
 */
import { requirementMatches, type LabelSelectorRequirement, type Labels } from '../core/label-selector.js';
import { badRequest } from './status.js';

/** The parsed requirements, ANDed: `a=b` / `a==b` is In (b), `a!=b` NotIn (b), `a` Exists, `!a` DoesNotExist. */
export type LabelSelector = readonly LabelSelectorRequirement[];

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
  const reqs: LabelSelectorRequirement[] = [];
  for (const part of splitTopLevel(raw)) {
    let m = /^!\s*([^\s=!(),]+)$/.exec(part);
    if (m) {
      reqs.push({ key: checkKey(m[1]!, raw), operator: 'DoesNotExist', values: [] });
      continue;
    }
    m = /^([^\s=!(),]+)\s+(in|notin)\s+\(([^()]*)\)$/.exec(part);
    if (m) {
      const values = m[3]!.split(',').map((v) => v.trim()).filter((v) => v !== '').map((v) => checkValue(v, raw));
      reqs.push({ key: checkKey(m[1]!, raw), operator: m[2] === 'in' ? 'In' : 'NotIn', values });
      continue;
    }
    m = /^([^\s=!(),]+)\s*(==|=|!=)\s*([^\s=!(),]*)$/.exec(part);
    if (m) {
      reqs.push({ key: checkKey(m[1]!, raw), operator: m[2] === '!=' ? 'NotIn' : 'In', values: [checkValue(m[3]!, raw)] });
      continue;
    }
    m = /^([^\s=!(),]+)$/.exec(part);
    if (m) {
      reqs.push({ key: checkKey(m[1]!, raw), operator: 'Exists', values: [] });
      continue;
    }
    throw badRequest(`unable to parse requirement: couldn't parse the selector string "${raw}"`);
  }
  return reqs;
}

export function matchesLabels(selector: LabelSelector, labels: Labels | undefined): boolean {
  const l = labels ?? {};
  return selector.every((r) => requirementMatches(r, l));
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
