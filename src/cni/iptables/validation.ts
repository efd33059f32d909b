/**
 * `--run-validation`: proves the capture works from inside the pod, as Istio's istio-validation
 * init container does. Listeners on 127.0.0.1 (::1 for IPv6) at the proxy port and the inbound
 * capture port; a client bound to 127.0.0.1 connects to 127.0.0.6:<probe port> (::6 for IPv6),
 * where nothing listens, and writes a random nonce. The check passes when a listener receives
 * the nonce: the connection can only have got there through the REDIRECT rules. (Istio reads
 * the original destination with SO_ORIGINAL_DST, which Node cannot; the nonce gives the same
 * proof.) Run it as the proxy UID (Istio runs it as 1337): the rules redirect that UID's
 * loopback traffic to the inbound capture port.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { IptablesError } from './errors.js';

export interface ValidationOptions {
  readonly ipv6: boolean;
  readonly proxyPort: number;
  readonly inboundCapturePort: number;
  readonly probePort: number;
  readonly timeoutMs: number;
  /** Pause between client attempts (default 250 ms). */
  readonly retryMs?: number;
  readonly signal?: AbortSignal;
}

export interface ValidationResult {
  /** The listener port the probe landed on. */
  readonly landedOn: number;
  readonly attempts: number;
}

function listen(host: string, port: number, onNonce: (nonce: string, port: number) => void): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const server = createServer((sock: Socket) => {
      let data = '';
      sock.setEncoding('utf8');
      sock.on('data', (d: string) => {
        data += d;
        if (data.length >= 32) {
          onNonce(data.slice(0, 32), port);
          sock.end();
        }
      });
      sock.on('error', () => sock.destroy());
      sock.setTimeout(2000, () => sock.destroy());
    });
    server.once('error', () => resolve(undefined));
    server.listen({ host, port, exclusive: true }, () => resolve(server));
  });
}

function probe(local: string, remote: string, port: number, nonce: string): Promise<void> {
  return new Promise((resolve) => {
    const sock = connect({ host: remote, port, localAddress: local });
    const done = () => {
      sock.destroy();
      resolve();
    };
    sock.setTimeout(1000, done);
    sock.on('connect', () => sock.end(nonce));
    sock.on('close', done);
    sock.on('error', done);
  });
}

export async function runValidation(opts: ValidationOptions): Promise<ValidationResult> {
  const local = opts.ipv6 ? '::1' : '127.0.0.1';
  const remote = opts.ipv6 ? '::6' : '127.0.0.6';
  const nonce = randomBytes(16).toString('hex');
  let landedOn: number | undefined;
  let wake: () => void = () => {};
  const onNonce = (got: string, port: number) => {
    if (got === nonce && landedOn === undefined) {
      landedOn = port;
      wake();
    }
  };
  const ports = [...new Set([opts.proxyPort, opts.inboundCapturePort])];
  const servers = (await Promise.all(ports.map((p) => listen(local, p, onNonce)))).filter(
    (s): s is Server => s !== undefined,
  );
  if (servers.length === 0) {
    throw new IptablesError('ERR_IPTABLES_VALIDATION', `no validation listener could bind on ${local} ports ${ports.join(',')}`);
  }
  const deadline = Date.now() + opts.timeoutMs;
  let attempts = 0;
  try {
    while (landedOn === undefined && Date.now() < deadline && opts.signal?.aborted !== true) {
      attempts++;
      await probe(local, remote, opts.probePort, nonce);
      if (landedOn !== undefined) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
        const t = setTimeout(resolve, Math.min(opts.retryMs ?? 250, Math.max(0, deadline - Date.now())));
        t.unref();
      });
    }
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }
  if (landedOn === undefined) {
    throw new IptablesError(
      'ERR_IPTABLES_VALIDATION',
      `iptables validation failed: a connection to ${remote}:${opts.probePort} did not reach the proxy ` +
        `listeners (${ports.join(', ')}) within ${opts.timeoutMs} ms; the workload is not ready for Istio`,
    );
  }
  return { landedOn, attempts };
}
