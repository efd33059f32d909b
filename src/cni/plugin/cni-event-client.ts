/**
 * Registers an ambient pod with the node broker: HTTP `POST /cmdadd` over the broker's Unix
 * socket with Istio's body `{"Netns","PodName","PodNamespace","IPs"}`, so Istio's own plugin and
 * ours speak the same protocol. `IPs` uses the JSON shape Go's encoder gives Istio's
 * `[]IPConfig{Interface *int; Address net.IPNet; Gateway net.IP}`:
 *   {"Interface": 0 | null, "Address": {"IP": "10.244.0.5", "Mask": "<base64 mask bytes>"}, "Gateway": "10.244.0.1" | null}
 * 200 is success; 503 (the broker's pod lookup failed) and no answer within the timeout fail the
 * ADD with "try again later" (11); any other status fails it with 101.
 */
import { request } from 'node:http';
import { CniError } from './cni-error.js';

export const CNI_ADD_EVENT_PATH = '/cmdadd';

export interface PodIpConfig {
  readonly Interface: number | null;
  readonly Address: { readonly IP: string; readonly Mask: string };
  readonly Gateway: string | null;
}

export interface CniAddEvent {
  readonly Netns: string;
  readonly PodName: string;
  readonly PodNamespace: string;
  readonly IPs: readonly PodIpConfig[] | null;
}

/** Mask bytes for a prefix length, base64 as Go encodes a []byte. */
function maskBase64(bits: number, bytes: number): string {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) {
    const take = Math.max(0, Math.min(8, bits - i * 8));
    b[i] = take === 0 ? 0 : (0xff << (8 - take)) & 0xff;
  }
  return b.toString('base64');
}

/** One prevResult IP (CIDR notation) in Istio's wire shape; undefined if it does not parse. */
export function toPodIpConfig(ip: { address: string; gateway?: string; interface?: number }): PodIpConfig | undefined {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(ip.address);
  if (!m) return undefined;
  const v6 = m[1]!.includes(':');
  const bits = Number(m[2]);
  if (bits > (v6 ? 128 : 32)) return undefined;
  return {
    Interface: ip.interface ?? null,
    Address: { IP: m[1]!, Mask: maskBase64(bits, v6 ? 16 : 4) },
    Gateway: ip.gateway ?? null,
  };
}

export interface CniEventClientOptions {
  readonly socketPath: string;
  readonly timeoutMs: number;
}

export async function pushCniAddEvent(event: CniAddEvent, options: CniEventClientOptions): Promise<void> {
  const body = JSON.stringify(event);
  await new Promise<void>((resolve, reject) => {
    const req = request(
      {
        socketPath: options.socketPath,
        path: CNI_ADD_EVENT_PATH,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), host: 'unix' },
        agent: false,
        timeout: options.timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size <= 1024 * 1024) chunks.push(c);
        });
        res.on('error', () => reject(new CniError('ERR_CNI_TRY_AGAIN', 'broker registration: response interrupted')));
        res.on('end', () => {
          if (res.statusCode === 200) {
            resolve();
            return;
          }
          const text = Buffer.concat(chunks).toString('utf8').replace(/\s+/g, ' ').trim().slice(0, 300);
          if (res.statusCode === 503) {
            reject(new CniError('ERR_CNI_TRY_AGAIN', 'node broker could not register the pod yet (HTTP 503)', { details: text }));
            return;
          }
          reject(
            new CniError('ERR_CNI_BROKER_REJECTED', `broker refused the pod registration (HTTP ${res.statusCode ?? 0})`, {
              details: text,
            }),
          );
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => {
      const why = err.message === 'timeout' ? `no answer within ${options.timeoutMs} ms` : (err.code ?? err.message);
      reject(
        new CniError('ERR_CNI_TRY_AGAIN', `cannot reach the node broker at ${options.socketPath}: ${why}`, {
          details: 'the node broker registers ambient pods; is it running on this node?',
        }),
      );
    });
    req.end(body);
  });
}
