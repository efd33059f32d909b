/**
 * Binding a node server (net, http, https, http2) as a promise: resolves with the bound TCP
 * port (port 0 picks a free one), rejects on a bind failure (EADDRINUSE, EACCES) instead of
 * leaving it to an unhandled 'error' event.
 */
import type { AddressInfo, Server } from 'node:net';

export function listenTcp(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
