/**
 * The one kubeconfig writer: a bearer-token kubeconfig (one cluster, one user, one context) as
 * YAML text, in the layout client-go's `clientcmd.Write` produces (keys sorted, block style, no
 * `preferences`) — the layout Istio's install-cni writes, so its conformance goldens match byte
 * for byte. Every component and test that writes a kubeconfig renders it here: install-cni's
 * plugin kubeconfig, the devcluster's user kubeconfigs, test fixtures.
 *
 * Pure string building with no dependency (install-cni stays light; the devcluster reads the
 * result with `yaml`, kubectl and client-node with their own parsers, the CNI plugin with
 * `readRenderedKubeconfigFile` below and `yaml` for any other layout).
 * Strings are written plain when YAML reads them back as the same string and double-quoted
 * otherwise, so any value round-trips.
 */
import { Secret } from './secret.js';

export interface KubeconfigFile {
  /** API server URL (`https://10.96.0.1:443`). */
  readonly server: string;
  /** PEM of the API server CA, inlined as `certificate-authority-data`. */
  readonly caPem?: string;
  /** Writes `insecure-skip-tls-verify: true` (no CA). */
  readonly insecureSkipTlsVerify?: boolean;
  /** Bearer token. The rendered text holds it: write it, never log it. */
  readonly token: Secret<string>;
  readonly clusterName: string;
  readonly userName: string;
  readonly contextName: string;
  /** Default namespace of the context. */
  readonly namespace?: string;
}

/** YAML 1.1/1.2 words that read as something other than a string (bool, null). */
const NON_STRING_WORDS = /^(?:true|false|yes|no|on|off|y|n|null|~)$/iu;
/** A string that needs no quoting: a letter, `_` or `/` first, no space and no indicator, not `x:`. */
const PLAIN_SAFE = /^[A-Za-z_/][A-Za-z0-9_./+=:@%~[\]-]*$/u;

/** `s` as a YAML scalar: plain when that reads back as `s`, a double-quoted (JSON, ASCII-only) string otherwise. */
export function yamlString(s: string): string {
  if (PLAIN_SAFE.test(s) && !s.endsWith(':') && !NON_STRING_WORDS.test(s)) return s;
  return JSON.stringify(s).replace(/[^\x20-\x7e]/gu, (c) => {
    const cp = c.codePointAt(0) ?? 0;
    return cp > 0xffff ? `\\U${cp.toString(16).padStart(8, '0')}` : `\\u${cp.toString(16).padStart(4, '0')}`;
  });
}

/** The kubeconfig as YAML text. Holds the token: write it with owner-only permissions, never log it. */
export function renderKubeconfigFile(f: KubeconfigFile): string {
  const cluster: string[] = [];
  if (f.caPem !== undefined) cluster.push(`certificate-authority-data: ${yamlString(Buffer.from(f.caPem, 'utf8').toString('base64'))}`);
  if (f.insecureSkipTlsVerify === true) cluster.push('insecure-skip-tls-verify: true');
  cluster.push(`server: ${yamlString(f.server)}`);
  const context = [`cluster: ${yamlString(f.clusterName)}`];
  if (f.namespace !== undefined) context.push(`namespace: ${yamlString(f.namespace)}`);
  context.push(`user: ${yamlString(f.userName)}`);
  const lines = [
    'apiVersion: v1',
    'clusters:',
    '- cluster:',
    ...cluster.map((l) => `    ${l}`),
    `  name: ${yamlString(f.clusterName)}`,
    'contexts:',
    '- context:',
    ...context.map((l) => `    ${l}`),
    `  name: ${yamlString(f.contextName)}`,
    `current-context: ${yamlString(f.contextName)}`,
    'kind: Config',
    'users:',
    `- name: ${yamlString(f.userName)}`,
    '  user:',
    `    token: ${yamlString(f.token.reveal())}`,
  ];
  return `${lines.join('\n')}\n`;
}

/** A scalar as `yamlString` writes it: plain, or double-quoted with JSON and `\U` escapes. */
function readYamlString(text: string): string | undefined {
  if (!text.startsWith('"')) return PLAIN_SAFE.test(text) ? text : undefined;
  try {
    const decoded: unknown = JSON.parse(text.replace(/\\U([0-9a-f]{8})/gu, (_m, hex: string) => JSON.stringify(String.fromCodePoint(parseInt(hex, 16))).slice(1, -1)));
    return typeof decoded === 'string' ? decoded : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The fast reader of what `renderKubeconfigFile` wrote, for short-lived readers (the CNI plugin
 * reads the file install-cni wrote on every ADD, and a YAML parser costs it milliseconds): the
 * fields of that exact layout, or undefined for any other text (then use a YAML parser). A result
 * is returned only when rendering it again gives the same text byte for byte, so it is exactly
 * what a YAML parser would have read.
 */
export function readRenderedKubeconfigFile(text: string): KubeconfigFile | undefined {
  const lines = text.split('\n');
  let i = 0;
  const take = (prefix: string): string | undefined => {
    const line = lines[i];
    if (line === undefined || !line.startsWith(prefix)) return undefined;
    i++;
    return readYamlString(line.slice(prefix.length));
  };
  const exact = (line: string): boolean => lines[i] === line && ++i > 0;
  if (!exact('apiVersion: v1') || !exact('clusters:') || !exact('- cluster:')) return undefined;
  const caData = lines[i]?.startsWith('    certificate-authority-data: ') ? take('    certificate-authority-data: ') : undefined;
  const insecure = exact('    insecure-skip-tls-verify: true');
  const server = take('    server: ');
  const clusterName = take('  name: ');
  if (!exact('contexts:') || !exact('- context:')) return undefined;
  const contextCluster = take('    cluster: ');
  const namespace = lines[i]?.startsWith('    namespace: ') ? take('    namespace: ') : undefined;
  const contextUser = take('    user: ');
  const contextName = take('  name: ');
  const current = take('current-context: ');
  if (!exact('kind: Config') || !exact('users:')) return undefined;
  const userName = take('- name: ');
  if (!exact('  user:')) return undefined;
  const token = take('    token: ');
  if (server === undefined || clusterName === undefined || contextName === undefined || userName === undefined || token === undefined) return undefined;
  if (contextCluster !== clusterName || contextUser !== userName || current !== contextName) return undefined;
  const caPem = caData === undefined ? undefined : Buffer.from(caData, 'base64').toString('utf8');
  const file: KubeconfigFile = {
    server,
    ...(caPem !== undefined ? { caPem } : {}),
    ...(insecure ? { insecureSkipTlsVerify: true } : {}),
    token: new Secret(token),
    clusterName,
    userName,
    contextName,
    ...(namespace !== undefined ? { namespace } : {}),
  };
  return renderKubeconfigFile(file) === text ? file : undefined;
}
