// The TCP receive buffer of a listener's connections, set on the listening socket.
//
// Why: after `pause()`, uWebSockets.js goes on reading the socket for as long as each read fills
// its 512 KiB buffer, so a paused upload whose sender keeps the kernel's receive queue full (any
// sender on the same machine, or a fast one across a network with the queue autotuned up to
// `net.ipv4.tcp_rmem`'s maximum) is delivered megabytes more after it asked to stop. With a
// receive buffer under 512 KiB a read after a pause does not in practice come back full (the
// kernel may hand one read what arrives while it copies, within the window it had advertised),
// and one pause delivers at most about one buffer. The price is a fixed TCP window: one
// connection moves at most about the buffer per round trip (256 KiB in 1 ms is 262 MB/s; in
// 20 ms, 13 MB/s).
//
// How: uWS offers no socket options, so the listening socket is found among this process's file
// descriptors (Linux: `/proc/self/fd`, a listening stream socket bound to the port) and given
// SO_RCVBUF through libc. Connections accepted from it inherit the value. Elsewhere, or when
// libc cannot be reached, the kernel's autotuning stays and the caller is told so.
import { readdirSync, readlinkSync } from 'node:fs';
import {
  AF_INET,
  AF_INET6,
  libc,
  SO_ACCEPTCONN,
  SO_RCVBUF,
  SO_TYPE,
  SOCK_STREAM,
  SOL_SOCKET,
  type Libc,
} from '../util/libc.js';

/** SO_RCVBUF is a C int. */
const INT32_MAX = 2 ** 31 - 1;

/** The port a TCP socket is bound to, or undefined for any other kind of descriptor. */
function boundPort(c: Libc, fd: number): number | undefined {
  const address = Buffer.alloc(128);
  if (!c.socketName(fd, address)) return undefined;
  const family = address.readUInt16LE(0);
  return family === AF_INET || family === AF_INET6 ? address.readUInt16BE(2) : undefined;
}

/** Descriptors of this process's listening TCP sockets bound to `port` (throws without /proc). */
function listeningSockets(c: Libc, port: number): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc/self/fd')) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${name}`);
    } catch {
      continue; // closed since the listing (the listing's own descriptor, for one)
    }
    if (!target.startsWith('socket:')) continue;
    const fd = Number(name);
    if (isListeningOn(c, fd, port)) found.push(fd);
  }
  return found;
}

function isListeningOn(c: Libc, fd: number, port: number): boolean {
  return (
    c.intOption(fd, SOL_SOCKET, SO_ACCEPTCONN) === 1 &&
    c.intOption(fd, SOL_SOCKET, SO_TYPE) === SOCK_STREAM &&
    boundPort(c, fd) === port
  );
}

export type ReceiveBufferResult =
  | { readonly set: true; readonly sockets: number; readonly kernelBytes: number }
  | { readonly set: false; readonly reason: string };

/**
 * Sets SO_RCVBUF to `bytes` on this process's listening sockets on `port`, before it accepts
 * connections (call it from the listen callback). The kernel doubles the value for its own
 * bookkeeping, after capping it at `net.core.rmem_max` (212,992 bytes on a stock kernel);
 * `kernelBytes` is what it reports back. Synchronous: it runs once, at start.
 */
export function setReceiveBuffer(port: number, bytes: number): ReceiveBufferResult {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > INT32_MAX)
    return { set: false, reason: `${bytes} is not a socket buffer size (1 to ${INT32_MAX} bytes)` };
  const c = libc();
  if (!c) return { set: false, reason: 'libc functions not available on this platform' };
  let sockets: number[];
  try {
    sockets = listeningSockets(c, port);
  } catch (error) {
    return { set: false, reason: `cannot list /proc/self/fd: ${String(error)}` };
  }
  if (sockets.length === 0) return { set: false, reason: `no listening socket on port ${port}` };
  let kernelBytes = 0;
  for (const fd of sockets) {
    // Checked again next to the write: the descriptor must still be that socket.
    if (!isListeningOn(c, fd, port) || !c.setIntOption(fd, SOL_SOCKET, SO_RCVBUF, bytes))
      return { set: false, reason: `setsockopt(SO_RCVBUF) failed on descriptor ${fd}` };
    kernelBytes = c.intOption(fd, SOL_SOCKET, SO_RCVBUF) ?? 0;
  }
  return { set: true, sockets: sockets.length, kernelBytes };
}

/** SO_RCVBUF of this process's listening sockets on `port` (for tests). */
export function receiveBufferOf(port: number): number[] {
  const c = libc();
  if (!c) return [];
  return listeningSockets(c, port).map((fd) => c.intOption(fd, SOL_SOCKET, SO_RCVBUF) ?? 0);
}
