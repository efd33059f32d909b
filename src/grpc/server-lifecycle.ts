/**
 * Binding and stopping a grpc-js Server: bind as a promise, and stop gracefully
 * (`tryShutdown`) with a deadline after which in-flight calls are cut (`forceShutdown`).
 */
import type { Server, ServerCredentials } from '@grpc/grpc-js';

export function bindServer(server: Server, address: string, credentials: ServerCredentials): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (err, port) => (err ? reject(err) : resolve(port)));
  });
}

/** Graceful shutdown within `deadlineMs`, then forced. Resolves once the server is closed. */
export function stopServer(server: Server, deadlineMs: number): Promise<'graceful' | 'forced'> {
  return new Promise((resolve) => {
    let done = false;
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      server.forceShutdown();
      resolve('forced');
    }, Math.max(0, deadlineMs));
    timer.unref();
    server.tryShutdown(() => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve('graceful');
    });
  });
}
