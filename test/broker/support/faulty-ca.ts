/**
 * A faulty external CA for the broker's tests: a real `IstioCertificateService` (grpc-js, TLS on
 * 127.0.0.1, its own root) that signs each CSR's key with a leaf profile chosen per identity —
 * a correct X509-SVID, or one that breaks a rule (CA:TRUE, keyCertSign, cRLSign, no
 * digitalSignature). It stands in for somebody else's misbehaving CA, not for certbroker's.
 */
import { randomBytes } from 'node:crypto';
import { Server, ServerCredentials, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { CA_PROTO } from '../../../src/protocol/istio-ca.js';
import { loadProtos, lookup } from '../../../src/grpc/proto-load.js';
import { structString } from '../../../src/grpc/struct-value.js';
import { createRootCa, exportPkcs8Pem, exportSpkiDer, generateKeyPair, pemEncode, readCsrDetails, toSigningCryptoKey, x509, type CaCertificate } from '../../../src/pki/index.js';

export type LeafProfile = 'svid' | 'ca-true' | 'key-cert-sign' | 'crl-sign' | 'no-digital-signature';

const KU = x509.KeyUsageFlags;

function leafExtensions(profile: LeafProfile, uri: string): x509.Extension[] {
  const usage = {
    svid: KU.digitalSignature | KU.keyEncipherment,
    'ca-true': KU.digitalSignature | KU.keyEncipherment,
    'key-cert-sign': KU.digitalSignature | KU.keyCertSign,
    'crl-sign': KU.digitalSignature | KU.cRLSign,
    'no-digital-signature': KU.keyAgreement,
  }[profile];
  return [
    new x509.KeyUsagesExtension(usage, true),
    new x509.BasicConstraintsExtension(profile === 'ca-true', undefined, true),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
    new x509.SubjectAlternativeNameExtension([{ type: 'url', value: uri }], true),
  ];
}

async function signLeaf(root: CaCertificate, publicKey: x509.PublicKey, extensions: x509.Extension[], ttlMs: number): Promise<string> {
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: `01${randomBytes(8).toString('hex')}`,
    subject: '',
    issuer: root.cert.subjectName,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + ttlMs),
    publicKey,
    signingKey: await toSigningCryptoKey(root.privateKey),
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions,
  });
  return pemEncode('CERTIFICATE', Buffer.from(cert.rawData));
}

export class FaultyCa {
  /** Leaf profile per requested identity; `defaultProfile` for the rest. */
  readonly profiles = new Map<string, LeafProfile>();
  defaultProfile: LeafProfile = 'svid';
  /** Lifetime of the leaves it issues. */
  leafTtlMs = 3_600_000;
  /** Identities asked for, in order. */
  readonly requests: string[] = [];

  private constructor(
    private readonly server: Server,
    readonly port: number,
    readonly root: CaCertificate,
  ) {}

  get rootsPem(): string {
    return this.root.pem;
  }

  static async start(): Promise<FaultyCa> {
    const root = await createRootCa({ subject: 'O=faulty, CN=Faulty Root', ttlSeconds: 86_400 });
    const serving = await generateKeyPair();
    const servingPem = await signLeaf(
      root,
      new x509.PublicKey(new Uint8Array(exportSpkiDer(serving.privateKey))),
      [
        new x509.KeyUsagesExtension(KU.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: 'localhost' }], false),
      ],
      86_400_000,
    );
    const server = new Server();
    let ca: FaultyCa | undefined;
    const { grpcObject } = loadProtos([CA_PROTO]);
    const service = lookup<{ service: ServiceDefinition }>(grpcObject, 'istio.v1.auth.IstioCertificateService').service;
    const implementation: UntypedServiceImplementation = {
      CreateCertificate: (
        call: { request: { csr: string; metadata?: Parameters<typeof structString>[0] } },
        callback: (err: Error | null, res?: unknown) => void,
      ) => {
        void (async () => {
          const csr = new x509.Pkcs10CertificateRequest(call.request.csr);
          const requested = readCsrDetails(call.request.csr).uris[0] ?? '';
          const identity = structString(call.request.metadata, 'ImpersonatedIdentity') || requested;
          ca!.requests.push(identity);
          const profile = ca!.profiles.get(identity) ?? ca!.defaultProfile;
          const leaf = await signLeaf(root, csr.publicKey, leafExtensions(profile, identity), ca!.leafTtlMs);
          callback(null, { cert_chain: [leaf, root.pem] });
        })().catch((err: unknown) => callback(err as Error));
      },
    };
    server.addService(service, implementation);
    const credentials = ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(servingPem + root.pem), private_key: Buffer.from(exportPkcs8Pem(serving.privateKey).reveal()) }], false);
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', credentials, (err, p) => (err ? reject(err) : resolve(p))));
    ca = new FaultyCa(server, port, root);
    return ca;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.server.tryShutdown(() => resolve());
      setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 500).unref();
    });
  }
}

