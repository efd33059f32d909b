/**
 * `certbroker k8s-signer` — signs the Kubernetes certificate requests (CertificateSigningRequests,
 * PodCertificateRequests) of one signerName with a plug-in CA. Configured by env (docs/ca.md); flags override.
 */
import { Command } from 'commander';
import { givenOptions } from './given-options.js';

export function command(): Command {
  return new Command('k8s-signer')
    .description('sign approved Kubernetes CertificateSigningRequests (and, with --controllers csr,pcr, PodCertificateRequests) of one signerName as X509-SVIDs, with a plug-in CA')
    .option('--signer-name <name>', 'the signerName to sign for, e.g. example.com/spiffe (K8S_SIGNER_NAME; required)')
    .option('--trust-domain <td>', 'SPIFFE trust domain (TRUST_DOMAIN, default cluster.local)')
    .option('--cacerts-dir <dir>', 'plug-in CA directory: ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem (K8S_SIGNER_CACERTS_DIR, default /etc/cacerts)')
    .option('--cacerts-secret <namespace/name>', 'read the plug-in CA from this Secret through the API instead of a directory (K8S_SIGNER_CACERTS_SECRET)')
    .option('--ops-address <host:port|off>', '/healthz, /readyz, /metrics address (K8S_SIGNER_OPS_ADDRESS, default 0.0.0.0:15018)')
    .option('--kubeconfig <path>', 'kubeconfig (KUBECONFIG; default in-cluster)')
    .option('--controllers <list>', 'APIs to sign for: csr, pcr (PodCertificateRequests, certificates.k8s.io/v1beta1), comma-separated (K8S_SIGNER_CONTROLLERS, default csr)')
    .action(async (opts: { signerName?: string; trustDomain?: string; cacertsDir?: string; cacertsSecret?: string; opsAddress?: string; kubeconfig?: string; controllers?: string }) => {
      const { runK8sSigner } = await import('../k8s-signer/run.js');
      await runK8sSigner(givenOptions(opts, ['signerName', 'trustDomain', 'cacertsDir', 'cacertsSecret', 'opsAddress', 'kubeconfig', 'controllers']));
    });
}
