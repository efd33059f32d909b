/**
 * Certificates made by the real openssl CLI, for tests that need chains node's own code did not
 * produce: CAs, intermediates, non-CA signers, leaves with chosen SANs and extended key usages.
 *
 *   const pki = new OpensslCerts(dir);
 *   const root = pki.ca('root');                                   // self-signed, CA:TRUE
 *   const leaf = pki.issue('srv', root, { san: 'IP:127.0.0.1', eku: 'serverAuth' });
 *   leaf.certPem, leaf.keyPem, leaf.certPath
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface OpensslCert {
  readonly name: string;
  readonly certPath: string;
  readonly keyPath: string;
  readonly certPem: string;
  readonly keyPem: string;
}

export interface IssueOptions {
  /** subjectAltName value, e.g. `IP:127.0.0.1,DNS:localhost`. */
  readonly san?: string;
  /** extendedKeyUsage value, e.g. `serverAuth` or `clientAuth`. */
  readonly eku?: string;
  /** basicConstraints CA:TRUE (an intermediate) instead of CA:FALSE. */
  readonly ca?: boolean;
  /** keyUsage value (default: keyCertSign,cRLSign for a CA, digitalSignature otherwise). */
  readonly keyUsage?: string;
  /** pathLenConstraint of a CA (`ca: true`). */
  readonly pathLen?: number;
  readonly days?: number;
  /** Write authorityKeyIdentifier (default true); without it only the issuer name links the leaf to its CA. */
  readonly authorityKeyId?: boolean;
}

export class OpensslCerts {
  readonly #dir: string;
  constructor(dir: string) {
    this.#dir = dir;
  }

  #run(args: readonly string[]): void {
    execFileSync('openssl', [...args], { cwd: this.#dir, stdio: ['ignore', 'ignore', 'pipe'] });
  }

  #read(name: string): OpensslCert {
    const certPath = join(this.#dir, `${name}.pem`);
    const keyPath = join(this.#dir, `${name}.key`);
    return { name, certPath, keyPath, certPem: readFileSync(certPath, 'utf8'), keyPem: readFileSync(keyPath, 'utf8') };
  }

  /** A self-signed P-256 CA (basicConstraints critical CA:TRUE, keyCertSign). */
  ca(name: string, days = 30, pathLen?: number): OpensslCert {
    this.#run([
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`,
      '-subj', `/CN=${name}`, '-days', String(days),
      '-addext', `basicConstraints=critical,CA:TRUE${pathLen !== undefined ? `,pathlen:${pathLen}` : ''}`, '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    return this.#read(name);
  }

  /** A P-256 certificate for `name` signed by `issuer`. */
  issue(name: string, issuer: OpensslCert, o: IssueOptions = {}): OpensslCert {
    this.#run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
    const ext = [
      o.ca ? `basicConstraints=critical,CA:TRUE${o.pathLen !== undefined ? `,pathlen:${o.pathLen}` : ''}` : 'basicConstraints=critical,CA:FALSE',
      `keyUsage=critical,${o.keyUsage ?? (o.ca ? 'keyCertSign,cRLSign' : 'digitalSignature')}`,
      ...(o.san ? [`subjectAltName=${o.san}`] : []),
      ...(o.eku ? [`extendedKeyUsage=${o.eku}`] : []),
      'subjectKeyIdentifier=hash',
      // openssl 3 adds one unless told `none`.
      o.authorityKeyId === false ? 'authorityKeyIdentifier=none' : 'authorityKeyIdentifier=keyid',
    ];
    writeFileSync(join(this.#dir, `${name}.ext`), `${ext.join('\n')}\n`);
    this.#run([
      'x509', '-req', '-in', `${name}.csr`, '-CA', issuer.certPath, '-CAkey', issuer.keyPath, '-CAcreateserial',
      '-out', `${name}.pem`, '-days', String(o.days ?? 1), '-extfile', `${name}.ext`,
    ]);
    return this.#read(name);
  }
}
