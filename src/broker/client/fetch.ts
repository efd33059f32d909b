/**
 * `certbroker fetch`: a small Broker API consumer for operators and the demo. It obtains its own
 * SVID from the CA with its token (no impersonation), subscribes for one pod over the broker's
 * socket with mTLS, prints identity, serial and validity of each message, and can write the
 * chain, key and bundle as PEM files.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { ConfigReader } from '../../core/config.js';
import { Secret } from '../../core/secret.js';
import { writeFileAtomic } from '../../ops/atomic-file.js';
import { ensurePrivateDir } from '../../ops/private-dir.js';
import { certificateToPem, pemEncode } from '../../pki/pem.js';
import { kubernetesIdentity } from '../../spiffe/kubernetes.js';
import type { SubscribeToX509SVIDResponse } from '../../protocol/spiffe-broker.js';
import { BrokerClient } from './broker-client.js';
import { IstioCaClient } from '../adapters/ca-client.js';
import { workloadCertPem } from '../cache/workload-cert.js';
import { splitDerCertificates } from '../../pki/x509-fields.js';
import { DEFAULTS, ENV, unixSocketPath } from '../config.js';

export interface FetchOptions {
  readonly socket?: string;
  readonly uid?: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly caAddress?: string;
  readonly caRootCertFile?: string;
  readonly caTlsServerName?: string;
  readonly trustDomain?: string;
  readonly clusterId?: string;
  /** File holding this consumer's own service-account token (audience istio-ca). */
  readonly tokenFile?: string;
  readonly outDir?: string;
  readonly watch?: boolean;
  /** Where lines go (stdout by default). */
  readonly print?: (line: string) => void;
  readonly signal?: AbortSignal;
}

const SERVICE_ACCOUNT_SUBJECT = /^system:serviceaccount:([^:]+):([^:]+)$/;

/** namespace/serviceaccount from a Kubernetes service-account JWT (claims only; the CA verifies it). */
function serviceAccountOfToken(jwt: string): { namespace: string; serviceAccount: string } | undefined {
  try {
    const { sub } = decodeJwt(jwt);
    const m = typeof sub === 'string' ? SERVICE_ACCOUNT_SUBJECT.exec(sub) : null;
    return m ? { namespace: m[1]!, serviceAccount: m[2]! } : undefined;
  } catch {
    return undefined;
  }
}

/** The SVIDs of a Broker API message (what `fetch` reads of it). */
type SvidMessage = Pick<SubscribeToX509SVIDResponse, 'svids'>;

function describeSvidMessage(msg: SvidMessage): string[] {
  return msg.svids.map((s) => {
    const leaf = new X509Certificate(splitDerCertificates(s.x509_svid)[0]!);
    return `${s.spiffe_id} serial=${leaf.serialNumber.toLowerCase()} notBefore=${new Date(leaf.validFrom).toISOString()} notAfter=${new Date(leaf.validTo).toISOString()}`;
  });
}

/**
 * Writes the SVID as PEM files; each goes through `writeFileAtomic` (fresh temp file, explicit mode,
 * rename). A directory this creates is 0700 whatever the umask (an existing one keeps its mode).
 */
export async function writeSvidFiles(dir: string, msg: SvidMessage): Promise<void> {
  const svid = msg.svids[0];
  if (!svid) return;
  await ensurePrivateDir(dir);
  await writeFileAtomic(join(dir, 'cert-chain.pem'), splitDerCertificates(svid.x509_svid).map((d) => certificateToPem(d)).join(''), { mode: 0o644 });
  await writeFileAtomic(join(dir, 'key.pem'), pemEncode('PRIVATE KEY', svid.x509_svid_key), { mode: 0o600 });
  await writeFileAtomic(join(dir, 'root-cert.pem'), splitDerCertificates(svid.bundle).map((d) => certificateToPem(d)).join(''), { mode: 0o644 });
}

export async function runFetch(options: FetchOptions): Promise<void> {
  const print = options.print ?? ((l: string) => process.stdout.write(l + '\n'));
  const r = new ConfigReader();
  const td = r.string(ENV.TRUST_DOMAIN, DEFAULTS.trustDomain, options.trustDomain);
  const socketRaw = r.string(ENV.BROKER_SOCKET, DEFAULTS.brokerSocket, options.socket);
  const socketPath = unixSocketPath(socketRaw);
  if (!socketPath) r.problem(`--socket/${ENV.BROKER_SOCKET}=${JSON.stringify(socketRaw)} is not unix:///path`);
  const caAddress = r.string(ENV.CA_ADDRESS, DEFAULTS.caAddress, options.caAddress);
  const rootFile = r.string(ENV.CA_ROOT_CERT_FILE, DEFAULTS.caRootCertFile, options.caRootCertFile);
  const clusterId = r.string(ENV.CLUSTER_ID, DEFAULTS.clusterId, options.clusterId);
  const tokenFile = r.required('--token-file', options.tokenFile);
  if (options.uid === undefined && (options.namespace === undefined || options.name === undefined)) {
    r.problem('name a pod with --uid, or --namespace and --name (or all three)');
  }
  r.done();

  const rootsPem = await readFile(rootFile, 'utf8');
  const token = (await readFile(tokenFile, 'utf8')).trim();
  const sa = serviceAccountOfToken(token);
  if (!sa) throw new Error(`${tokenFile} does not hold a Kubernetes service-account token`);
  const identity = kubernetesIdentity(td, sa.namespace, sa.serviceAccount);
  const ca = new IstioCaClient({
    address: caAddress,
    caRootsPem: rootsPem,
    ...(options.caTlsServerName ? { tlsServerName: options.caTlsServerName } : {}),
    tokens: { token: async () => new Secret(token) },
    clusterId,
    certTtlSeconds: 3600,
    impersonate: false,
  });
  let own;
  try {
    own = await ca.fetchCertificate(identity, options.signal ?? new AbortController().signal);
  } finally {
    ca.close();
  }
  print(`own SVID ${identity} serial=${own.serial}`);
  const client = new BrokerClient({
    socketPath: socketPath!,
    rootsPem,
    ...workloadCertPem(own),
    trustDomain: td,
  });
  const stream = client.subscribeX509Svid({
    ...(options.uid !== undefined ? { uid: options.uid } : {}),
    ...(options.namespace !== undefined ? { namespace: options.namespace } : {}),
    ...(options.name !== undefined ? { name: options.name } : {}),
  });
  const onAbort = () => stream.cancel();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      const outDir = options.outDir;
      // One write at a time, in message order: the files of two rotations never mix (a chain
      // from one message beside the key of another), and a later rotation is never overwritten
      // by an earlier one. The call resolves only once the last write is on disk.
      let writes: Promise<void> = Promise.resolve();
      stream.on('data', (msg: SubscribeToX509SVIDResponse) => {
        for (const line of describeSvidMessage(msg)) print(line);
        writes = writes.then(() => (outDir ? writeSvidFiles(outDir, msg) : undefined));
        writes.then(
          () => {
            if (!options.watch) {
              stream.cancel();
              resolve();
            }
          },
          reject,
        );
      });
      stream.on('error', (err: { code?: number; details?: string }) => {
        if (err.code === 1 /* CANCELLED by us */) writes.then(resolve, reject);
        else reject(new Error(`Broker API: ${err.details ?? String(err)}`));
      });
      stream.on('end', () => writes.then(resolve, reject));
    });
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    client.close();
  }
}
