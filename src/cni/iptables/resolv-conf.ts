/**
 * resolv.conf nameservers, split by family (what Istio's DNS capture needs when it does not
 * capture all port-53 traffic). Pure parser; reading the file is the caller's job.
 */
import { ipFamily } from './addresses.js';

export interface Nameservers {
  readonly v4: readonly string[];
  readonly v6: readonly string[];
}

/** `nameserver ADDR` lines, in file order; comments (# ;) and malformed addresses are skipped. */
export function parseResolvConf(text: string): Nameservers {
  const v4: string[] = [];
  const v6: string[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/[#;].*$/, '').trim();
    const [key, addr] = line.split(/\s+/);
    if (key !== 'nameserver' || addr === undefined) continue;
    const fam = ipFamily(addr);
    if (fam === 'v4') v4.push(addr);
    else if (fam === 'v6') v6.push(addr);
  }
  return { v4, v6 };
}
