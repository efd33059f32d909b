/**
 * The file descriptor under an accepted `net.Socket` (adapter). Node keeps it on the socket's
 * libuv handle (`socket._handle.fd`, a `Pipe` for Unix sockets), which its types do not
 * declare: read it with checks, no casts. Undefined once the socket is closed (fd -1 or no handle).
 */
import type { Socket } from 'node:net';

export function socketFd(socket: Socket): number | undefined {
  if (socket.destroyed) return undefined;
  const handle: unknown = Reflect.get(socket, '_handle');
  if (typeof handle !== 'object' || handle === null || !('fd' in handle)) return undefined;
  const fd = handle.fd;
  return typeof fd === 'number' && Number.isInteger(fd) && fd >= 0 ? fd : undefined;
}

/**
 * The libuv handle itself (a `Pipe`), for handing the descriptor to a child process over Node's IPC
 * channel (`child.send(message, handle)`), undefined once the socket is closed.
 */
export function socketHandle(socket: Socket): object | undefined {
  if (socketFd(socket) === undefined) return undefined;
  const handle: unknown = Reflect.get(socket, '_handle');
  return typeof handle === 'object' && handle !== null ? handle : undefined;
}
