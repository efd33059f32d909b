/**
 * The kubeconfig the CNI plugin uses to reach the API server, built from the install-cni
 * pod's own environment: server from KUBERNETES_SERVICE_HOST/PORT/PROTOCOL, CA from the
 * service-account `ca.crt` (or KUBE_CA_FILE), or insecure-skip-tls-verify when asked, and the
 * pod's service-account token. Names (cluster `local`, user `istio-cni`, context
 * `istio-cni-context`) and layout match Istio's, so the file reads the same to either plugin.
 *
 * Pure: the adapter reads the files and hands the contents in. The token stays a `Secret`
 * until the one place that renders the file.
 */
import { isIPv6 } from 'node:net';
import { renderKubeconfigFile, type KubeconfigFile } from '../../core/kubeconfig-file.js';
import { Secret } from '../../core/secret.js';
import { InstallError } from './errors.js';

export const KUBECONFIG_CLUSTER = 'local';
export const KUBECONFIG_USER = 'istio-cni';
export const KUBECONFIG_CONTEXT = 'istio-cni-context';

export interface KubeconfigInputs {
  readonly serviceHost: string;
  readonly servicePort: string;
  /** `https` (default) or `http`. */
  readonly serviceProtocol: string;
  /** PEM text of the API server CA; required for https unless `skipTlsVerify`. */
  readonly caPem: string | undefined;
  readonly skipTlsVerify: boolean;
  readonly token: Secret<string>;
}

/** `https://10.96.0.1:443`, `https://[fd00::1]:443`. */
export function apiServerUrl(inputs: Pick<KubeconfigInputs, 'serviceHost' | 'servicePort' | 'serviceProtocol'>): string {
  const problems: string[] = [];
  const host = inputs.serviceHost.trim();
  if (host === '') problems.push('KUBERNETES_SERVICE_HOST is empty');
  if (/[\s/@]/.test(host)) problems.push(`KUBERNETES_SERVICE_HOST=${JSON.stringify(host)} is not a host name or IP`);
  const port = inputs.servicePort.trim();
  const portNumber = Number(port);
  if (!/^\d+$/.test(port) || portNumber < 1 || portNumber > 65535) {
    problems.push(`KUBERNETES_SERVICE_PORT=${JSON.stringify(inputs.servicePort)} is not a port number`);
  }
  const protocol = inputs.serviceProtocol.trim() === '' ? 'https' : inputs.serviceProtocol.trim();
  if (protocol !== 'https' && protocol !== 'http') {
    problems.push(`KUBERNETES_SERVICE_PROTOCOL=${JSON.stringify(inputs.serviceProtocol)} is not https or http`);
  }
  if (problems.length > 0) throw new InstallError('ERR_KUBECONFIG_INPUT_INVALID', problems.join('; '));
  const hostPart = isIPv6(host) ? `[${host}]` : host;
  return `${protocol}://${hostPart}:${portNumber}`;
}

/** The kubeconfig's content, checked (rendered by the shared kubeconfig writer in Istio's layout). */
export function buildKubeconfig(inputs: KubeconfigInputs): KubeconfigFile {
  const server = apiServerUrl(inputs);
  const token = inputs.token.reveal().trim();
  if (token === '' || /\s/.test(token)) {
    throw new InstallError('ERR_KUBECONFIG_INPUT_INVALID', 'service-account token is empty or malformed');
  }
  const names = { clusterName: KUBECONFIG_CLUSTER, userName: KUBECONFIG_USER, contextName: KUBECONFIG_CONTEXT, token: new Secret(token) };
  if (inputs.skipTlsVerify) return { ...names, server, insecureSkipTlsVerify: true };
  if (server.startsWith('http://')) return { ...names, server };
  const ca = inputs.caPem;
  if (ca === undefined || !ca.includes('-----BEGIN CERTIFICATE-----')) {
    throw new InstallError(
      'ERR_KUBECONFIG_INPUT_INVALID',
      'no API server CA certificate (service-account ca.crt or KUBE_CA_FILE) and SKIP_TLS_VERIFY is off',
    );
  }
  return { ...names, server, caPem: ca };
}

/** YAML text of the kubeconfig. The result holds the token: write it, never log it. */
export function renderKubeconfig(inputs: KubeconfigInputs): string {
  return renderKubeconfigFile(buildKubeconfig(inputs));
}
