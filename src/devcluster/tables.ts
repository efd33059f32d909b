/**
 * Server-side printing: when a client asks for `application/json;as=Table;g=meta.k8s.io;v=v1`
 * (kubectl get does), lists, single objects and watch events come back as meta.k8s.io/v1 Tables
 * with the columns kubectl users know (pods: READY, STATUS, RESTARTS, AGE, IP, NODE; namespaces:
 * STATUS; nodes: STATUS, ROLES, VERSION; CSRs: SIGNERNAME, REQUESTOR, REQUESTEDDURATION,
 * CONDITION; podcertificaterequests: SIGNERNAME, POD, SERVICEACCOUNT, NODE, STATE; everything
 * else NAME and AGE).
 */
import type { IncomingMessage } from 'node:http';
import type { KubeObject } from './store.js';
import type { ResourceType } from './resources.js';

interface Column {
  readonly name: string;
  readonly type: string;
  readonly format: string;
  readonly description: string;
  readonly priority: number;
}

const col = (name: string, type: string, priority = 0, format = ''): Column => ({ name, type, format, description: name, priority });

/** True when the Accept header asks for meta.k8s.io Tables. */
export function wantsTable(req: IncomingMessage): boolean {
  const accept = req.headers.accept ?? '';
  return accept.split(',').some((part) => {
    const p = part.replace(/\s/g, '');
    return p.includes('as=Table') && p.includes('g=meta.k8s.io') && (p.includes('v=v1;') || p.endsWith('v=v1'));
  });
}

/** kubectl's duration printing: 45s, 3m20s, 15m, 5h12m, 36h, 3d4h, 120d, 3y... */
export function humanAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (h < 24 * 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  if (d < 365 * 2) return `${d}d`;
  return `${Math.floor(d / 365)}y`;
}

function age(o: KubeObject, nowMs: number): string {
  const created = Date.parse(o.metadata.creationTimestamp ?? '');
  return Number.isNaN(created) ? '<unknown>' : humanAge(nowMs - created);
}

type Status = Record<string, unknown> | undefined;

function podRow(o: KubeObject, nowMs: number): unknown[] {
  const spec = (o.spec ?? {}) as { containers?: unknown[]; nodeName?: string };
  const status = o.status as Status;
  const cs = ((status?.containerStatuses as Array<{ ready?: boolean; restartCount?: number }> | undefined) ?? []);
  const ready = cs.filter((c) => c.ready).length;
  const restarts = cs.reduce((n, c) => n + (c.restartCount ?? 0), 0);
  const phase = o.metadata.deletionTimestamp ? 'Terminating' : String(status?.phase ?? 'Pending');
  return [o.metadata.name, `${ready}/${(spec.containers ?? []).length}`, phase, restarts, age(o, nowMs), status?.podIP ?? '<none>', spec.nodeName || '<none>', '<none>', '<none>'];
}

/** kubectl's CSR CONDITION column: Denied or Approved (or Pending), then ",Failed", then ",Issued". */
function csrCondition(status: Status): string {
  const conditions = ((status?.conditions as Array<{ type?: string; status?: string }> | undefined) ?? []).filter((c) => c.status !== 'False');
  const has = (type: string) => conditions.some((c) => c.type === type);
  let out = has('Denied') ? 'Denied' : has('Approved') ? 'Approved' : 'Pending';
  if (has('Failed')) out += ',Failed';
  if (typeof status?.certificate === 'string' && status.certificate !== '') out += ',Issued';
  return out;
}

function tableShape(t: ResourceType): { columns: Column[]; row: (o: KubeObject, nowMs: number) => unknown[] } {
  const name = { ...col('Name', 'string', 0, 'name') };
  if (t.group === '' && t.plural === 'pods') {
    return {
      columns: [name, col('Ready', 'string'), col('Status', 'string'), col('Restarts', 'string'), col('Age', 'string'), col('IP', 'string', 1), col('Node', 'string', 1), col('Nominated Node', 'string', 1), col('Readiness Gates', 'string', 1)],
      row: podRow,
    };
  }
  if (t.group === '' && t.plural === 'namespaces') {
    return { columns: [name, col('Status', 'string'), col('Age', 'string')], row: (o, now) => [o.metadata.name, o.metadata.deletionTimestamp ? 'Terminating' : String((o.status as Status)?.phase ?? 'Active'), age(o, now)] };
  }
  if (t.group === '' && t.plural === 'nodes') {
    return {
      columns: [name, col('Status', 'string'), col('Roles', 'string'), col('Age', 'string'), col('Version', 'string')],
      row: (o, now) => [o.metadata.name, 'Ready', '<none>', age(o, now), 'v1.32.0-devcluster'],
    };
  }
  if (t.group === 'certificates.k8s.io' && t.plural === 'certificatesigningrequests') {
    return {
      columns: [name, col('Age', 'string'), col('SignerName', 'string'), col('Requestor', 'string'), col('RequestedDuration', 'string'), col('Condition', 'string')],
      row: (o, now) => {
        const spec = (o.spec ?? {}) as { signerName?: string; username?: string; expirationSeconds?: number };
        const duration = typeof spec.expirationSeconds === 'number' ? humanAge(spec.expirationSeconds * 1000) : '<none>';
        return [o.metadata.name, age(o, now), spec.signerName || '<none>', spec.username ?? '', duration, csrCondition(o.status as Status)];
      },
    };
  }
  if (t.group === 'coordination.k8s.io' && t.plural === 'leases') {
    return { columns: [name, col('Holder', 'string'), col('Age', 'string')], row: (o, now) => [o.metadata.name, String((o.spec as { holderIdentity?: string } | undefined)?.holderIdentity ?? ''), age(o, now)] };
  }
  if (t.group === 'certificates.k8s.io' && t.plural === 'clustertrustbundles') {
    return { columns: [name, col('SignerName', 'string')], row: (o) => [o.metadata.name, String((o.spec as { signerName?: string } | undefined)?.signerName || '<none>')] };
  }
  if (t.group === 'certificates.k8s.io' && t.plural === 'podcertificaterequests') {
    return {
      columns: [name, col('SignerName', 'string'), col('Pod', 'string'), col('ServiceAccount', 'string'), col('Node', 'string', 1), col('State', 'string'), col('Age', 'string')],
      row: pcrRow,
    };
  }
  return { columns: [name, col('Age', 'string')], row: (o, now) => [o.metadata.name, age(o, now)] };
}

/** A request's state: its terminal condition (Issued, Denied, Failed), else Pending. */
function pcrRow(o: KubeObject, nowMs: number): unknown[] {
  const spec = (o.spec ?? {}) as { signerName?: string; podName?: string; serviceAccountName?: string; nodeName?: string };
  const conditions = ((o.status as Status)?.conditions as Array<{ type?: string; status?: string }> | undefined) ?? [];
  const state = conditions.find((c) => c.status === 'True' && (c.type === 'Issued' || c.type === 'Denied' || c.type === 'Failed'))?.type ?? 'Pending';
  return [o.metadata.name, spec.signerName ?? '', spec.podName ?? '', spec.serviceAccountName ?? '', spec.nodeName ?? '', state, age(o, nowMs)];
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

function rowObject(t: ResourceType, o: KubeObject, include: IncludeObject): Record<string, unknown> | undefined {
  if (include === 'None') return undefined;
  if (include === 'Object') return { apiVersion: t.group === '' ? t.version : `${t.group}/${t.version}`, kind: t.kind, ...o };
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
}

export function includeObjectParam(q: URLSearchParams): IncludeObject {
  const v = q.get('includeObject');
  return v === 'None' || v === 'Object' ? v : 'Metadata';
}

export function toTable(t: ResourceType, objects: readonly KubeObject[], o: { nowMs: number; include: IncludeObject; resourceVersion?: string; continueToken?: string }): Record<string, unknown> {
  const shape = tableShape(t);
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { ...(o.resourceVersion ? { resourceVersion: o.resourceVersion } : {}), ...(o.continueToken ? { continue: o.continueToken } : {}) },
    columnDefinitions: shape.columns,
    rows: objects.map((obj) => {
      const object = rowObject(t, obj, o.include);
      return { cells: shape.row(obj, o.nowMs), ...(object ? { object } : {}) };
    }),
  };
}
