/**
 * The fast leaf path: a TBSCertificate assembled from pre-encoded DER pieces with only the
 * varying fields (serial, validity, SPKI, SAN URI) spliced in, signed with node:crypto and a
 * cached KeyObject. Proven byte-identical to the @peculiar/x509 reference builder by
 * test/pki/leaf-differential.test.ts. No @peculiar/x509 here, so worker threads load fast.
 */
import { sign, type KeyObject } from 'node:crypto';
import { parseSpiffeId } from '../spiffe/id.js';
import { signatureAlgorithmForKey, type SignatureAlgorithm } from './algorithms.js';
import { encodeLength, encodeOid, encodeTime, tlv, TAG_BIT_STRING, TAG_INTEGER, TAG_OCTET_STRING, TAG_SEQUENCE } from './der.js';
import { PkiError } from './errors.js';
import type { KeySpec } from './keys.js';
import { parseCsr } from './csr.js';
import { pemEncode } from './pem.js';
import {
  LEAF_BASIC_CONSTRAINTS_VALUE,
  LEAF_EXT_KEY_USAGE_VALUE,
  LEAF_KEY_USAGE_VALUE,
  planLeaf,
  serialHex,
  type LeafPlan,
  type RandomBytes,
} from './profile.js';

/**
 * What a leaf builder needs from its signing CA. Plain data plus a KeyObject, so it can be
 * posted to a worker thread as is.
 */
export interface LeafSigner {
  /** The signing certificate's subject Name, DER, exactly as in its certificate. */
  readonly subjectDer: Buffer;
  /** The signing certificate's subjectKeyIdentifier (becomes the leaf's AKI), if any. */
  readonly subjectKeyId: Buffer | undefined;
  readonly notAfterMs: number;
  readonly keySpec: KeySpec;
  readonly privateKey: KeyObject;
}

const TRUE = Buffer.from([0x01, 0x01, 0xff]);
const VERSION_V3 = Buffer.from('a003020102', 'hex');
const EMPTY_NAME = Buffer.from('3000', 'hex');

function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  return critical
    ? tlv(TAG_SEQUENCE, encodeOid(oid), TRUE, tlv(TAG_OCTET_STRING, value))
    : tlv(TAG_SEQUENCE, encodeOid(oid), tlv(TAG_OCTET_STRING, value));
}

const SAN_HEAD = Buffer.concat([encodeOid('2.5.29.17'), TRUE]);

export class LeafTemplate {
  readonly signer: LeafSigner;
  readonly algorithm: SignatureAlgorithm;
  /** version .. issuer is fixed except the serial between them. */
  readonly #sigAlgAndIssuer: Buffer;
  /** KU, EKU, BC and AKI extensions, encoded once. */
  readonly #fixedExtensions: Buffer;

  constructor(signer: LeafSigner) {
    this.signer = signer;
    this.algorithm = signatureAlgorithmForKey(signer.keySpec);
    this.#sigAlgAndIssuer = Buffer.concat([this.algorithm.der, signer.subjectDer]);
    const exts = [
      extension('2.5.29.15', true, LEAF_KEY_USAGE_VALUE),
      extension('2.5.29.37', false, LEAF_EXT_KEY_USAGE_VALUE),
      extension('2.5.29.19', true, LEAF_BASIC_CONSTRAINTS_VALUE),
    ];
    if (signer.subjectKeyId && signer.subjectKeyId.length > 0) {
      exts.push(extension('2.5.29.35', false, tlv(TAG_SEQUENCE, tlv(0x80, signer.subjectKeyId))));
    }
    this.#fixedExtensions = Buffer.concat(exts);
  }

  /** The TBSCertificate DER for one leaf. `uri` must already be validated. */
  buildTbs(plan: LeafPlan, spki: Buffer, uri: string): Buffer {
    const uriBytes = Buffer.from(uri, 'utf8');
    // SAN extension: SEQUENCE { OID, TRUE, OCTET STRING { SEQUENCE { [6] uri } } }
    const gn = tlv(0x86, uriBytes);
    const san = tlv(TAG_SEQUENCE, SAN_HEAD, tlv(TAG_OCTET_STRING, tlv(TAG_SEQUENCE, gn)));
    const extsLen = this.#fixedExtensions.length + san.length;
    const extsSeqHeader = Buffer.concat([Buffer.from([TAG_SEQUENCE]), encodeLength(extsLen)]);
    const extsInner = extsSeqHeader.length + extsLen;
    const validity = tlv(TAG_SEQUENCE, encodeTime(plan.notBeforeMs), encodeTime(plan.notAfterMs));
    const serial = tlv(TAG_INTEGER, plan.serial);
    const parts = [
      VERSION_V3,
      serial,
      this.#sigAlgAndIssuer,
      validity,
      EMPTY_NAME,
      spki,
      Buffer.from([0xa3]),
      encodeLength(extsInner),
      extsSeqHeader,
      this.#fixedExtensions,
      san,
    ];
    let bodyLen = 0;
    for (const p of parts) bodyLen += p.length;
    return Buffer.concat([Buffer.from([TAG_SEQUENCE]), encodeLength(bodyLen), ...parts]);
  }

  /** Signs a TBSCertificate and returns the Certificate DER. */
  signTbs(tbs: Buffer): Buffer {
    let signature: Buffer;
    try {
      signature = sign(this.algorithm.hash, tbs, this.signer.privateKey);
    } catch (err) {
      throw new PkiError('ERR_PKI_SIGN_FAILED', 'signing the certificate failed', err);
    }
    return tlv(TAG_SEQUENCE, tbs, this.algorithm.der, tlv(TAG_BIT_STRING, Buffer.from([0]), signature));
  }
}

export interface LeafRequest {
  /** PKCS#10 CSR, PEM or DER. Its subject and SANs are ignored; its signature must verify. */
  readonly csr: string | Uint8Array;
  /** The identity to certify (URI SAN); must be a valid SPIFFE ID. */
  readonly spiffeId: string;
  readonly ttlSeconds: number;
}

export interface IssuedLeaf {
  readonly der: Uint8Array;
  readonly pem: string;
  readonly serialHex: string;
  readonly notBeforeMs: number;
  readonly notAfterMs: number;
  readonly spiffeId: string;
}

export interface FastLeafIssuerOptions {
  readonly signer: LeafSigner;
  readonly now?: () => number;
  readonly randomBytes?: RandomBytes;
  readonly maxTtlSeconds?: number;
}

/** CSR parse + verify + leaf build + sign + PEM, on the current thread. */
export class FastLeafIssuer {
  readonly #template: LeafTemplate;
  readonly #now: () => number;
  readonly #randomBytes: RandomBytes | undefined;
  readonly #maxTtlSeconds: number | undefined;

  constructor(options: FastLeafIssuerOptions) {
    this.#template = new LeafTemplate(options.signer);
    this.#now = options.now ?? Date.now;
    this.#randomBytes = options.randomBytes;
    this.#maxTtlSeconds = options.maxTtlSeconds;
  }

  issue(request: LeafRequest): IssuedLeaf {
    parseSpiffeId(request.spiffeId);
    const csr = parseCsr(request.csr);
    const plan = planLeaf({
      nowMs: this.#now(),
      ttlSeconds: request.ttlSeconds,
      signerNotAfterMs: this.#template.signer.notAfterMs,
      maxTtlSeconds: this.#maxTtlSeconds,
      randomBytes: this.#randomBytes,
    });
    const der = this.#template.signTbs(this.#template.buildTbs(plan, csr.spki, request.spiffeId));
    return {
      der,
      pem: pemEncode('CERTIFICATE', der),
      serialHex: serialHex(plan.serial),
      notBeforeMs: plan.notBeforeMs,
      notAfterMs: plan.notAfterMs,
      spiffeId: request.spiffeId,
    };
  }
}
