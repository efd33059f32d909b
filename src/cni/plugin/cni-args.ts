/**
 * CNI_ARGS: `K=V` pairs separated by `;` (CNI spec, libcni conventions). The Kubernetes keys are
 * the ones container runtimes pass; any other key is an error unless `IgnoreUnknown` is true.
 */
import { CniError } from './cni-error.js';

export interface K8sArgs {
  readonly podName: string;
  readonly podNamespace: string;
  readonly podUid: string;
  readonly infraContainerId: string;
}

const KNOWN = new Set(['IgnoreUnknown', 'K8S_POD_NAME', 'K8S_POD_NAMESPACE', 'K8S_POD_UID', 'K8S_POD_INFRA_CONTAINER_ID']);

function parseBoolArg(raw: string): boolean {
  const v = raw.toLowerCase();
  if (v === '1' || v === 'true') return true;
  if (v === '0' || v === 'false') return false;
  throw new CniError('ERR_CNI_INVALID_ENV', `CNI_ARGS: IgnoreUnknown=${JSON.stringify(raw)} is not a boolean`);
}

export function parseCniArgs(raw: string | undefined): K8sArgs {
  const values = new Map<string, string>();
  const unknown: string[] = [];
  let ignoreUnknown = false;
  for (const pair of (raw ?? '').split(';')) {
    if (pair === '') continue;
    const kv = pair.split('=');
    if (kv.length !== 2 || kv[0] === '') {
      throw new CniError('ERR_CNI_INVALID_ENV', `CNI_ARGS: invalid pair ${JSON.stringify(pair)} (want KEY=VALUE)`);
    }
    const [key, value] = kv as [string, string];
    if (key === 'IgnoreUnknown') ignoreUnknown = parseBoolArg(value);
    if (!KNOWN.has(key)) unknown.push(key);
    values.set(key, value);
  }
  if (unknown.length > 0 && !ignoreUnknown) {
    throw new CniError('ERR_CNI_INVALID_ENV', `CNI_ARGS: unknown args ${unknown.map((k) => JSON.stringify(k)).join(', ')}`, {
      details: 'set IgnoreUnknown=1 to allow keys this plugin does not know',
    });
  }
  return Object.freeze({
    podName: values.get('K8S_POD_NAME') ?? '',
    podNamespace: values.get('K8S_POD_NAMESPACE') ?? '',
    podUid: values.get('K8S_POD_UID') ?? '',
    infraContainerId: values.get('K8S_POD_INFRA_CONTAINER_ID') ?? '',
  });
}
