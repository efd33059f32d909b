/**
 * Reads the kubeconfig that install-cni writes for the plugin: current context -> cluster
 * (`server`, `certificate-authority-data` or `certificate-authority`, `insecure-skip-tls-verify`)
 * and user (`token` or `tokenFile`). Only what a bearer-token client needs; anything else
 * (client certificates, exec plugins) is refused with a clear error.
 */
import { readFile } from 'node:fs/promises';
import { CniError } from './cni-error.js';
import { Secret } from '../../core/secret.js';

export interface KubeAccess {
  readonly server: URL;
  readonly caPem: string | undefined;
  readonly insecureSkipTlsVerify: boolean;
  readonly token: Secret<string> | undefined;
}

type Obj = Record<string, unknown>;

function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function named(list: unknown, name: string, what: string, path: string): Obj {
  const entry = Array.isArray(list) ? list.find((e) => isObject(e) && e.name === name) : undefined;
  const body = isObject(entry) ? entry[what] : undefined;
  if (!isObject(body)) throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: no ${what} named ${JSON.stringify(name)}`);
  return body;
}

async function parseDocument(text: string): Promise<unknown> {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{')) return JSON.parse(text);
  // Loaded only here: most ADDs (excluded namespaces, the agent's own pod) never read a kubeconfig.
  const { parse } = await import('yaml');
  return parse(text);
}

export async function loadKubeconfig(path: string): Promise<KubeAccess> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Not written yet: install-cni is still starting; the runtime should retry the pod.
    throw new CniError('ERR_CNI_TRY_AGAIN', `cannot read kubeconfig ${path}${code ? ` (${code})` : ''}`, {
      details: 'install-cni writes this file when it starts',
    });
  }
  let doc: unknown;
  try {
    doc = await parseDocument(text);
  } catch {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path} is neither YAML nor JSON`);
  }
  if (!isObject(doc)) throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path} is not a mapping`);
  const contextName = doc['current-context'];
  if (typeof contextName !== 'string' || contextName === '') {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path} has no current-context`);
  }
  const context = named(doc.contexts, contextName, 'context', path);
  const cluster = named(doc.clusters, String(context.cluster ?? ''), 'cluster', path);
  const user = context.user === undefined ? {} : named(doc.users, String(context.user), 'user', path);

  let server: URL;
  try {
    server = new URL(String(cluster.server ?? ''));
  } catch {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: cluster server ${JSON.stringify(cluster.server)} is not a URL`);
  }
  if (server.protocol !== 'https:' && server.protocol !== 'http:') {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: server must be https://`);
  }
  let caPem: string | undefined;
  if (typeof cluster['certificate-authority-data'] === 'string') {
    caPem = Buffer.from(cluster['certificate-authority-data'], 'base64').toString('utf8');
  } else if (typeof cluster['certificate-authority'] === 'string') {
    try {
      caPem = await readFile(cluster['certificate-authority'], 'utf8');
    } catch {
      throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: cannot read certificate-authority ${cluster['certificate-authority']}`);
    }
  }
  const insecure = cluster['insecure-skip-tls-verify'] === true;

  let token: Secret<string> | undefined;
  if (typeof user.token === 'string' && user.token !== '') {
    token = new Secret(user.token);
  } else if (typeof user.tokenFile === 'string') {
    try {
      token = new Secret((await readFile(user.tokenFile, 'utf8')).trim());
    } catch {
      throw new CniError('ERR_CNI_TRY_AGAIN', `kubeconfig ${path}: cannot read tokenFile ${user.tokenFile}`);
    }
  } else if (user['client-certificate-data'] !== undefined || user.exec !== undefined || user['auth-provider'] !== undefined) {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: only bearer-token users are supported`);
  }
  return Object.freeze({ server, caPem, insecureSkipTlsVerify: insecure, token });
}
