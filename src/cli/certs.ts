/**
 * `certbroker certs` — makes an Istio plug-in CA bundle (root-cert.pem, ca-cert.pem,
 * ca-key.pem, cert-chain.pem, and root-key.pem) for `certbroker ca --signer cacerts` or for
 * istiod's `cacerts` Secret. Default output: certs/generated/.
 */
import { Command } from 'commander';

export function command(): Command {
  return new Command('certs')
    .description('make a plug-in CA bundle (root + intermediate) into certs/generated/')
    .option('--out <dir>', 'output directory', 'certs/generated')
    .option('--root-subject <dn>', 'root CA subject', 'O=certbroker, CN=Root CA')
    .option('--ca-subject <dn>', 'intermediate (signing) CA subject', 'O=certbroker, CN=Intermediate CA')
    .option('--root-days <n>', 'root validity in days', '3650')
    .option('--ca-days <n>', 'intermediate validity in days', '730')
    .option('--key-type <type>', 'ec-p256 | ec-p384 | rsa-2048 | rsa-3072 | rsa-4096', 'ec-p256')
    .option('--force', 'replace an existing bundle in --out')
    .action(async (opts: { out: string; rootSubject: string; caSubject: string; rootDays: string; caDays: string; keyType: string; force?: boolean }) => {
      const problems: string[] = [];
      const days = (name: string, raw: string): number => {
        if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 100 * 365) problems.push(`--${name}=${JSON.stringify(raw)} is not a whole number of days (1..36500)`);
        return Number(raw) * 86400;
      };
      const rootTtlSeconds = days('root-days', opts.rootDays);
      const caTtlSeconds = days('ca-days', opts.caDays);
      const { KEY_TYPES, makePluginCaBundle } = await import('../pki/plugin-ca.js');
      if (!(KEY_TYPES as readonly string[]).includes(opts.keyType)) problems.push(`--key-type=${JSON.stringify(opts.keyType)} is not one of ${KEY_TYPES.join('|')}`);
      if (rootTtlSeconds < caTtlSeconds) problems.push('--ca-days must not exceed --root-days');
      if (problems.length > 0) throw new Error(`invalid options:\n  - ${problems.join('\n  - ')}`);
      const { writeCaCertsDir } = await import('../pki/cacerts-dir.js');
      const bundle = await makePluginCaBundle({
        rootSubject: opts.rootSubject,
        caSubject: opts.caSubject,
        rootTtlSeconds,
        caTtlSeconds,
        keyType: opts.keyType as (typeof KEY_TYPES)[number],
        nowMs: Date.now(),
      });
      const files = await writeCaCertsDir(opts.out, bundle, opts.force === true);
      process.stdout.write(`wrote ${files.join(', ')}\n`);
    });
}
