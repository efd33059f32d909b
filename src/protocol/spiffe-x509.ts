/**
 * The X.509 messages the SPIFFE Workload API and the SPIFFE Broker API share field for field
 * (`X509SVID`, the SVID response, the bundles response), written once; each API's file names
 * them as its standard does. `x509SvidResponse` / `x509BundlesResponse` build them: one SVID
 * (chain leaf first, PKCS#8 key, the trust domain's roots), no CRL, no federation.
 */

export interface X509SVID {
  /** The SPIFFE ID in the leaf. */
  readonly spiffe_id: string;
  /** DER chain, leaf first, then intermediates. */
  readonly x509_svid: Buffer;
  /** DER PKCS#8 private key, unencrypted. */
  readonly x509_svid_key: Buffer;
  /** DER roots of the SVID's trust domain. */
  readonly bundle: Buffer;
  readonly hint: string;
}

export interface X509SVIDResponse {
  readonly svids: readonly X509SVID[];
  /** DER CRLs (certbroker sends none). */
  readonly crl: readonly Buffer[];
  /** DER bundles of foreign trust domains, keyed by trust domain SPIFFE ID. */
  readonly federated_bundles: Readonly<Record<string, Buffer>>;
}

export interface X509BundlesResponse {
  readonly crl: readonly Buffer[];
  /** DER roots keyed by trust domain SPIFFE ID (`spiffe://<td>`). */
  readonly bundles: Readonly<Record<string, Buffer>>;
}

/** What one SVID message carries, as the broker holds it. */
export interface SvidMaterial {
  readonly spiffeId: string;
  readonly chainDer: readonly Buffer[];
  readonly privateKeyDer: Buffer;
  /** The trust domain's roots, concatenated DER. */
  readonly bundleDer: Buffer;
}

export function x509SvidResponse(m: SvidMaterial): X509SVIDResponse {
  return {
    svids: [{ spiffe_id: m.spiffeId, x509_svid: Buffer.concat(m.chainDer), x509_svid_key: m.privateKeyDer, bundle: m.bundleDer, hint: '' }],
    crl: [],
    federated_bundles: {},
  };
}

export function x509BundlesResponse(trustDomain: string, bundleDer: Buffer): X509BundlesResponse {
  return { crl: [], bundles: { [`spiffe://${trustDomain}`]: bundleDer } };
}
