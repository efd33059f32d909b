/**
 * `certbroker ca` — the CA server (IstioCertificateService on :15012). Configured by env (see
 * docs/ca.md); flags override the most common settings for local runs.
 */
import { Command } from 'commander';
import type { StepCaFlags } from '../ca/signers/step-ca-config.js';
import { givenOptions } from './given-options.js';

interface CaOptions {
  grpcAddress?: string;
  plaintext?: boolean;
  opsAddress?: string;
  trustDomain?: string;
  signer?: string;
  cacertsDir?: string;
  kubeconfig?: string;
  clusterId?: string;
  publishTrustBundle?: boolean;
  trustBundleSignerName?: string;
  k8sSignerName?: string;
  k8sCsrAutoApprove?: boolean;
  k8sCsrRootsFile?: string;
  upstreamAddress?: string;
  upstreamRootCertFile?: string;
  upstreamTokenFile?: string;
  upstreamClusterId?: string;
  tokenReviewTimeoutSeconds?: string;
}

export function command(): Command {
  return new Command('ca')
    .description('run the CA server: Istio-compatible IstioCertificateService with node authorization')
    .option('--grpc-address <host:port>', 'gRPC listen address (CA_GRPC_ADDRESS, default 0.0.0.0:15012)')
    .option('--plaintext', 'serve gRPC without TLS: loopback development only (CA_PLAINTEXT)')
    .option('--ops-address <host:port|off>', '/healthz, /readyz, /metrics address (CA_OPS_ADDRESS, default 0.0.0.0:15014)')
    .option('--trust-domain <td>', 'SPIFFE trust domain (TRUST_DOMAIN, default cluster.local)')
    .option('--signer <kind>', 'self-signed | cacerts | kubernetes-csr | step-ca | istio-upstream | module:<path-or-package> (CA_SIGNER)')
    .option('--k8s-signer-name <name>', 'kubernetes-csr: the signerName of the CSRs it creates (CA_K8S_SIGNER_NAME)')
    .option('--k8s-csr-auto-approve', 'kubernetes-csr: approve the CSRs it creates (CA_K8S_CSR_AUTO_APPROVE; needs approve on signers/<name>)')
    .option('--k8s-csr-roots-file <file>', 'kubernetes-csr: PEM roots the issued certificates must chain to (CA_K8S_CSR_ROOTS_FILE)')
    .option('--step-ca-url <url>', 'step-ca: https:// address of step-ca (CA_STEP_CA_URL)')
    .option('--step-ca-root <file>', 'step-ca: PEM roots step-ca and its leaves chain to (CA_STEP_CA_ROOT)')
    .option('--provisioner <name>', 'step-ca: JWK provisioner name (CA_STEP_CA_PROVISIONER)')
    .option('--provisioner-key-file <file>', 'step-ca: the provisioner\'s private JWK, or its JWE (CA_STEP_CA_PROVISIONER_KEY_FILE)')
    .option('--provisioner-key-password-file <file>', 'step-ca: password of an encrypted provisioner key (CA_STEP_CA_PROVISIONER_KEY_PASSWORD_FILE)')
    .option('--cacerts-dir <dir>', 'plug-in CA directory (CA_CACERTS_DIR, default /etc/cacerts)')
    .option('--kubeconfig <path>', 'kubeconfig of the local cluster (KUBECONFIG; default in-cluster)')
    .option('--cluster-id <id>', 'id of the local cluster (CLUSTER_ID, default Kubernetes)')
    .option('--upstream-address <host:port>', 'istio-upstream: the upstream IstioCertificateService (CA_UPSTREAM_ADDRESS)')
    .option('--upstream-root-cert-file <pem>', 'istio-upstream: roots the upstream and its answers must chain to (CA_UPSTREAM_ROOT_CERT_FILE)')
    .option('--upstream-token-file <file>', 'istio-upstream: this CA\'s bearer token for the upstream, re-read on change (CA_UPSTREAM_TOKEN_FILE)')
    .option('--upstream-cluster-id <id>', 'istio-upstream: clusterid sent upstream (CA_UPSTREAM_CLUSTER_ID, default Kubernetes)')
    .option('--token-review-timeout-seconds <n>', 'one TokenReview is abandoned after this long: ERR_CA_AUTHN_BACKEND, UNAVAILABLE to the caller (CA_TOKEN_REVIEW_TIMEOUT_SECONDS, 1-60, default 5)')
    .option('--publish-trust-bundle', 'publish the roots: istio-ca-root-cert in every namespace and a ClusterTrustBundle, by the Lease holder (CA_PUBLISH_TRUST_BUNDLE, default on)')
    .option('--no-publish-trust-bundle', 'do not publish the roots')
    .option('--trust-bundle-signer-name <name>', 'signerName of the published ClusterTrustBundle (CA_TRUST_BUNDLE_SIGNER_NAME, default istio.io/istiod-ca)')
    .action(async (opts: CaOptions & StepCaFlags) => {
      const { runCa } = await import('../ca/run.js');
      await runCa({
        ...givenOptions(opts, ['grpcAddress', 'opsAddress', 'trustDomain', 'signer', 'cacertsDir', 'kubeconfig', 'clusterId']),
        ...givenOptions(opts, ['k8sSignerName', 'k8sCsrRootsFile']),
        ...givenOptions(opts, ['stepCaUrl', 'stepCaRoot', 'provisioner', 'provisionerKeyFile', 'provisionerKeyPasswordFile']),
        ...givenOptions(opts, ['upstreamAddress', 'upstreamRootCertFile', 'upstreamTokenFile', 'upstreamClusterId', 'trustBundleSignerName', 'tokenReviewTimeoutSeconds']),
        ...(opts.plaintext ? { plaintext: 'true' } : {}),
        ...(opts.k8sCsrAutoApprove ? { k8sCsrAutoApprove: 'true' } : {}),
        ...(opts.publishTrustBundle !== undefined ? { publishTrustBundle: String(opts.publishTrustBundle) } : {}),
      });
    })
    .addCommand(rotateRootCommand());
}

/**
 * `certbroker ca rotate-root <prepare|activate|finish|rollback|status>`: one step of the
 * self-signed CA's root rotation on its Secret (docs/operations.md, "Rotating the CA").
 */
function rotateRootCommand(): Command {
  return new Command('rotate-root')
    .description('one step of the self-signed CA root rotation (prepare, activate, finish, rollback) or its status, on the istio-ca-secret Secret')
    .argument('<step>', 'prepare | activate | finish | rollback | status')
    .option('--kubeconfig <path>', 'kubeconfig (KUBECONFIG; default in-cluster)')
    .option('--namespace <ns>', 'namespace of the Secret (CA_NAMESPACE, default istio-system)')
    .option('--secret <name>', 'name of the Secret (default istio-ca-secret)')
    .option('--trust-domain <td>', 'trust domain, the new root\'s O= (TRUST_DOMAIN, default cluster.local)')
    .option('--key-type <ec|rsa>', 'key of the new root (CA_SELF_SIGNED_KEY, default ec)')
    .option('--root-ttl-seconds <n>', 'lifetime of the new root (CA_SELF_SIGNED_ROOT_TTL_SECONDS, default 10 years)')
    .action(async (step: string, _opts: unknown, cmd: Command) => {
      // --kubeconfig and --trust-domain are the parent's options too: commander gives them to `ca`.
      const opts = cmd.optsWithGlobals<{ kubeconfig?: string; namespace?: string; secret?: string; trustDomain?: string; keyType?: string; rootTtlSeconds?: string }>();
      const { runRotateRoot } = await import('../ca/rotate-root-cli.js');
      await runRotateRoot(step, opts);
    });
}
