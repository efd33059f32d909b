/**
 * The rendered deploy/ manifests, exactly as an operator gets them: `kubectl kustomize deploy/`
 * (real kubectl with its built-in kustomize). Rendered once per process.
 */
import { execFile } from 'node:child_process';
import { symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { removeTempDirSync, tempDirSync } from '../support/scratch.js';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface K8sObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string> };
  readonly [field: string]: unknown;
}

let rendered: Promise<K8sObject[]> | undefined;

export function renderDeploy(): Promise<K8sObject[]> {
  rendered ??= new Promise((resolve, reject) => {
    execFile('kubectl', ['kustomize', 'deploy/'], { cwd: REPO_ROOT, maxBuffer: 16 << 20, timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) {
        reject(new Error(`kubectl kustomize deploy/ failed: ${stderr || err.message}`));
        return;
      }
      const docs = parseAllDocuments(stdout);
      const errors = docs.flatMap((d) => d.errors);
      if (errors.length > 0) {
        reject(new Error(`rendered YAML does not parse: ${errors[0]!.message}`));
        return;
      }
      resolve(docs.map((d) => d.toJS() as K8sObject).filter((o) => o !== null));
    });
  });
  return rendered;
}

/**
 * deploy/ with kustomize components enabled (e.g. `components/kubernetes-csr`), rendered as an
 * operator's overlay would: a scratch kustomization next to a link to deploy/.
 */
export async function renderDeployWith(components: readonly string[]): Promise<K8sObject[]> {
  const dir = tempDirSync('kustomize-');
  try {
    symlinkSync(join(REPO_ROOT, 'deploy'), join(dir, 'deploy'));
    writeFileSync(join(dir, 'kustomization.yaml'), `resources:\n  - deploy\ncomponents:\n${components.map((c) => `  - deploy/${c}\n`).join('')}`);
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile('kubectl', ['kustomize', dir], { maxBuffer: 16 << 20, timeout: 30_000 }, (err, out, stderr) => (err ? reject(new Error(`kubectl kustomize failed: ${stderr || err.message}`)) : resolve(out)));
    });
    return parseAllDocuments(stdout).map((d) => d.toJS() as K8sObject).filter((o) => o !== null);
  } finally {
    removeTempDirSync(dir);
  }
}

/** The identity objects (namespace, service accounts, RBAC) of `objects`. */
export function identityObjectsOf(objects: readonly K8sObject[]): K8sObject[] {
  return objects.filter((o) => o.kind === 'Namespace' || o.kind === 'ServiceAccount' || RBAC_KINDS.has(o.kind));
}

const RBAC_KINDS = new Set(['ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);

/** Namespace, service accounts and RBAC: what the API server needs to authorize the accounts. */
export async function identityObjects(): Promise<K8sObject[]> {
  return (await renderDeploy()).filter((o) => o.kind === 'Namespace' || o.kind === 'ServiceAccount' || RBAC_KINDS.has(o.kind));
}

export async function findObject(kind: string, name: string): Promise<K8sObject> {
  const o = (await renderDeploy()).find((x) => x.kind === kind && x.metadata.name === name);
  if (o === undefined) throw new Error(`deploy/ renders no ${kind} ${name}`);
  return o;
}
