/**
 * Reads the kubeconfig that install-cni writes for the plugin: current context -> cluster
 * (`server`, `certificate-authority-data` or `certificate-authority`, `insecure-skip-tls-verify`)
 * and user (`token` or `tokenFile`, and/or a client certificate: `client-certificate-data` /
 * `client-certificate` with `client-key-data` / `client-key`). Exec and auth-provider plugins
 * are refused with a clear error.
 */
// Synchronous reads: a process that lives for one ADD would otherwise start libuv's thread pool
// for three small files (measured: the slowest step of a sidecar ADD under load, docs/benchmarks.md).
import { readFileSync } from 'node:fs';
import { CniError } from './cni-error.js';
import { errCode } from '../../core/errors.js';
import { Secret } from '../../core/secret.js';
import { readRenderedKubeconfigFile, type KubeconfigFile } from '../../core/kubeconfig-file.js';

export interface KubeAccess {
  readonly server: URL;
  readonly caPem: string | undefined;
  readonly insecureSkipTlsVerify: boolean;
  readonly token: Secret<string> | undefined;
  /** The user's TLS client certificate (PEM chain) and its key. */
  readonly clientCert: { readonly certPem: string; readonly keyPem: Secret<string> } | undefined;
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

/** An inlined (`<name>-data`, base64) or file (`<name>`) PEM value of `section`; undefined when neither is set. */
function pemValue(section: Obj, name: string, path: string): string | undefined {
  const inline = section[`${name}-data`];
  if (typeof inline === 'string') return Buffer.from(inline, 'base64').toString('utf8');
  const file = section[name];
  if (typeof file !== 'string') return undefined;
  try {
    return readFileSync(file, 'utf8');
  } catch {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: cannot read ${name} ${file}`);
  }
}

function clientCertificate(user: Obj, path: string): KubeAccess['clientCert'] {
  const certPem = pemValue(user, 'client-certificate', path);
  const keyPem = pemValue(user, 'client-key', path);
  if (certPem === undefined && keyPem === undefined) return undefined;
  if (certPem === undefined || keyPem === undefined) {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: a client certificate needs both client-certificate and client-key`);
  }
  return Object.freeze({ certPem, keyPem: new Secret(keyPem) });
}

function serverUrl(raw: unknown, path: string): URL {
  let server: URL;
  try {
    server = new URL(String(raw ?? ''));
  } catch {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: cluster server ${JSON.stringify(raw)} is not a URL`);
  }
  if (server.protocol !== 'https:' && server.protocol !== 'http:') {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: server must be https://`);
  }
  return server;
}

/** The access a file in install-cni's own layout gives (what the document path reads from it). */
function fromRendered(f: KubeconfigFile, path: string): KubeAccess {
  const token = f.token.reveal() === '' ? undefined : f.token;
  return Object.freeze({ server: serverUrl(f.server, path), caPem: f.caPem, insecureSkipTlsVerify: f.insecureSkipTlsVerify === true, token, clientCert: undefined });
}

export async function loadKubeconfig(path: string): Promise<KubeAccess> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = errCode(err);
    // Not written yet: install-cni is still starting; the runtime should retry the pod.
    throw new CniError('ERR_CNI_TRY_AGAIN', `cannot read kubeconfig ${path}${code ? ` (${code})` : ''}`, {
      details: 'install-cni writes this file when it starts',
    });
  }
  // install-cni's own layout needs no YAML parser; any other text is parsed in full.
  const rendered = readRenderedKubeconfigFile(text);
  if (rendered !== undefined) return fromRendered(rendered, path);
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

  const server = serverUrl(cluster.server, path);
  const caPem = pemValue(cluster, 'certificate-authority', path);
  const insecure = cluster['insecure-skip-tls-verify'] === true;

  let token: Secret<string> | undefined;
  if (typeof user.token === 'string' && user.token !== '') {
    token = new Secret(user.token);
  } else if (typeof user.tokenFile === 'string') {
    try {
      token = new Secret(readFileSync(user.tokenFile, 'utf8').trim());
    } catch {
      throw new CniError('ERR_CNI_TRY_AGAIN', `kubeconfig ${path}: cannot read tokenFile ${user.tokenFile}`);
    }
  } else if (user.exec !== undefined || user['auth-provider'] !== undefined) {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `kubeconfig ${path}: exec and auth-provider users are not supported (a token or a client certificate is)`);
  }
  const clientCert = clientCertificate(user, path);
  return Object.freeze({ server, caPem, insecureSkipTlsVerify: insecure, token, clientCert });
}
