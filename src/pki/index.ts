/**
 * pki — keys, CSRs, the istiod leaf profile, CA certificates, chains, PEM/DER.
 * Domain code: no filesystem except `cacerts-dir.ts` (the adapter that reads a directory).
 *
 * Keys (node:crypto KeyObjects, parsed once):
 *   generateKeyPair(spec = P256) -> {privateKey, publicKey}  (async; never the sync-EC + JWK trap)
 *   exportPkcs8Der(key) / exportPkcs8Pem(key) -> Secret<...>; exportSpkiDer(key)
 *   parsePrivateKeyPem(pem), parsePkcs8Der(der), keySpecOf(key), keyMatches(priv, pubOrSpki)
 * CSRs:
 *   createCsr({privateKey, uri}) -> {der, pem}        ztunnel-style (empty subject, critical URI SAN)
 *   parseCsr(pemOrDer) -> VerifiedCsr {spki, publicKey, keySpec, signatureAlgorithm}
 *     fast DER walk + node:crypto verify; ERR_PKI_PEM_*, ERR_PKI_CSR_MALFORMED,
 *   parseCsrAsync(pemOrDer) -> Promise<VerifiedCsr>: same checks and codes, P-256 keys via WebCrypto raw import (faster)
 *     ERR_PKI_CSR_UNSUPPORTED_ALGORITHM, ERR_PKI_CSR_UNSUPPORTED_KEY, ERR_PKI_CSR_SIGNATURE_INVALID
 *   readCsrDetails(csr) -> {subject, uris, sanCritical, dnsNames, ipAddresses, emails, otherSans}   (@peculiar/x509, not on the hot path)
 * Leaf issuance (istiod profile, profile.ts):
 *   new FastLeafIssuer({signer: material.leafSigner, now?, randomBytes?, maxTtlSeconds?})
 *     .issue({csr, spiffeId, ttlSeconds}) -> IssuedLeaf {der, pem, serialHex, notBeforeMs, notAfterMs, spiffeId}
 *     .issueAsync(request) -> Promise<IssuedLeaf>   (same result and codes, ~7-10 % less CPU: parseCsrAsync)
 *   new LeafIssuerPool({signer, size?}) .issue(request) -> Promise<IssuedLeaf> (worker threads, issueAsync)
 *     .setSigner(signer), .pending, .close({drainMs?}) (drain: answer taken requests first)
 *   LeafTemplate (buildTbs/signTbs), planLeaf, buildLeafReference (the @peculiar/x509 reference)
 *   TTL: ERR_PKI_TTL_INVALID (<= 0 / not integer), ERR_PKI_TTL_TOO_LONG (> maxTtlSeconds, default 90 d)
 * CA certificates:
 *   createRootCa({subject, ttlSeconds, keySpec?, privateKey?, pathLength?, nowMs?})
 *   createIntermediateCa({...same, issuer: {cert, privateKey}}) -> CaCertificate {cert, der, pem, privateKey}
 *   caKeyMaterial({cert, keyObject, chain?, roots?}) -> CaKeyMaterial {cert, certDer, certPem, keyObject,
 *     keySpec, chain, roots, leafSigner, notAfterMs, signerIsRoot}; responseChainPems(m); rootBundlePem(m)
 *   checkSigningCa(cert, nowMs, what) (cA + keyCertSign + valid now); rootCaKeyMaterial({cert, keyObject},
 *     nowMs, what): the same plus self-signed and key match (the self-signed CA's stored root)
 * Chains: verifyChain({leaf, intermediates, roots, nowMs, leafIsCa?}) -> ordered path; parseCertificates(pem);
 *   parseCertificate(derOrPem); parseResponseChain(certChainPems, nowMs) -> {leaf, intermediates, roots} (verified)
 * cacerts: validateCaBundle({caCertPem, caKeyPem, certChainPem, rootCertPem}, nowMs) -> CaKeyMaterial (pure);
 *   loadCaCertsDir(dir, nowMs?) (reads ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem);
 *   makePluginCaBundle({rootSubject, caSubject, rootTtlSeconds, caTtlSeconds, keyType, nowMs}) (pure) and
 *   writeCaCertsDir(dir, bundle, force?) — what `certbroker certs` uses.
 * PEM/DER: parsePem, parsePemBlocksOfType, parsePemOne, pemEncode, certificateFields
 * Errors: PkiError with ERR_PKI_* codes (input problems -> invalid-argument; signer problems ->
 *   failed-precondition; signing failure -> internal).
 */
export { PkiError, type PkiErrorCode } from './errors.js';
export {
  ECDSA_SHA256,
  ECDSA_SHA384,
  RSA_SHA256,
  signatureAlgorithmForKey,
  type SignatureAlgorithm,
} from './algorithms.js';
export {
  P256,
  exportPkcs8Der,
  exportPkcs8Pem,
  exportSpkiDer,
  generateKeyPair,
  keyMatches,
  keySpecOf,
  parsePkcs8Der,
  parsePrivateKeyPem,
  type KeyPair,
  type KeySpec,
} from './keys.js';
export { parsePem, parsePemBlocksOfType, parsePemOne, pemEncode, certificateToPem, type PemBlock } from './pem.js';
export { certificateFields, keyIdentifier, type CertificateFields } from './cert-fields.js';
export {
  CSR_PEM_TYPES,
  MAX_CSR_BYTES,
  createCsr,
  parseCsr,
  parseCsrAsync,
  csrPublicKeyInfo,
  importSubjectKey,
  type Csr,
  type CreateCsrOptions,
  type VerifiedCsr,
} from './csr.js';
export { readCsrDetails, verifyCsrReference, type CsrDetails } from './csr-details.js';
export {
  LEAF_BACKDATE_MS,
  MAX_LEAF_TTL_SECONDS,
  planLeaf,
  randomSerial,
  serialHex,
  type LeafPlan,
  type LeafPlanInput,
  type RandomBytes,
} from './profile.js';
export {
  FastLeafIssuer,
  LeafTemplate,
  type FastLeafIssuerOptions,
  type IssuedLeaf,
  type KeyLeafRequest,
  type LeafRequest,
  type LeafSigner,
} from './leaf-template.js';
export { buildLeafReference, issueLeafReference, type ReferenceIssueInput, type ReferenceLeaf, type ReferenceLeafInput } from './leaf-reference.js';
export { createIntermediateCa, createRootCa, parseCaSubject, type CaCertificate, type CreateCaOptions, type Issuer } from './ca-certs.js';
export {
  caKeyMaterial,
  checkSigningCa,
  computedKeyId,
  responseChainPems,
  rootBundlePem,
  rootCaKeyMaterial,
  type CaKeyMaterial,
  type CaKeyMaterialInput,
} from './ca-material.js';
export { parseCertificate, toSigningCryptoKey, x509 } from './x509-lib.js';
export { chainAnchor, parseCertificates, parseResponseChain, verifyChain, type ResponseChain, type VerifyChainInput } from './chain.js';
export { CACERTS_FILES, validateCaBundle, type CaBundleTexts } from './ca-bundle.js';
export { loadCaCertsDir } from './cacerts-dir.js';
export { LeafIssuerPool, type LeafIssuerPoolOptions } from './leaf-pool.js';
export { leafFacts, verifyLeafSignature, type LeafFacts } from './leaf-facts.js';
export { checkAnswerChain, elementKeys, type AnswerChain } from './answer-chain.js';
export { AnchoredTails } from './anchored-tails.js';
export {
  MAX_SERVING_NAMES,
  canonicalServingName,
  encodeServingNames,
  ipAddressBytes,
  servingNameKind,
  servingNameProblem,
  type ServingNameKind,
} from './serving-names.js';
export { KEY_TYPES, keySpecForType, makePluginCaBundle, type KeyType, type PluginCaBundle, type PluginCaOptions } from './plugin-ca.js';
export { writeCaCertsDir } from './cacerts-dir.js';
