// A scripted HTTP/1.1 server for the load generator's tests (load.test.ts, native-load.test.ts):
// a node:net server that parses each request itself (Content-Length bodies), keeps what it saw,
// and answers from a script, dripping the response a few bytes per packet (TCP_NODELAY, a timer
// turn between writes), early (before the body), after a pause in reading, or with a close.
//
// This module is a helper, not a test; tap lists it as "no tests found".

import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { parseTarget, type Target } from '../../bench/http1.js';

export interface SeenRequest {
  readonly head: string;
  readonly body: Buffer;
}

export interface Script {
  /** The response bytes for a request; null closes the connection without answering. */
  respond(request: SeenRequest, index: number): Buffer | null;
  /** Bytes per write when dripping the response. */
  readonly pieceBytes?: number;
  /** Answer right after the head, without reading the body. */
  readonly early?: boolean;
  /** Stop reading for this long after the head (forces client backpressure). */
  readonly pauseMs?: number;
  /** Close after answering. */
  readonly close?: boolean;
}

async function drip(socket: Socket, bytes: Buffer, pieceBytes: number): Promise<void> {
  for (let offset = 0; offset < bytes.length && !socket.destroyed; offset += pieceBytes) {
    socket.write(bytes.subarray(offset, offset + pieceBytes));
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

/** Request bytes received so far, kept as a list so that large bodies are not re-copied. */
class Received {
  private chunks: Buffer[] = [];
  length = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  /** Joins what is needed to look for the head (heads arrive first and are small). */
  headEnd(): number {
    if (this.chunks.length > 1 && (this.chunks[0]?.length ?? 0) < 65536) this.join();
    return this.chunks[0]?.indexOf('\r\n\r\n') ?? -1;
  }

  /** Removes and returns the first `count` bytes. */
  take(count: number): Buffer {
    const all = this.join();
    this.chunks = [all.subarray(count)];
    this.length = all.length - count;
    return Buffer.from(all.subarray(0, count));
  }

  private join(): Buffer {
    const all = Buffer.concat(this.chunks, this.length);
    this.chunks = [all];
    return all;
  }
}

/** Parses requests (Content-Length bodies) off the socket and answers from the script. */
function handleConnection(socket: Socket, script: Script, seen: SeenRequest[]): void {
  socket.setNoDelay(true);
  const received = new Received();
  let busy = false;
  let pausedFor = -1;
  let discarding = false;
  const pump = async (): Promise<void> => {
    const headEnd = busy ? -1 : received.headEnd();
    if (headEnd < 0) return;
    if (script.pauseMs !== undefined && pausedFor !== seen.length) {
      pausedFor = seen.length;
      busy = true;
      socket.pause();
      await new Promise((resolve) => setTimeout(resolve, script.pauseMs));
      socket.resume();
      busy = false;
    }
    busy = true;
    const head = received.take(headEnd + 4).toString('latin1', 0, headEnd);
    const length = script.early ? 0 : Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    while (received.length < length) await new Promise((resolve) => socket.once('data', resolve));
    const body = received.take(length);
    seen.push({ head, body });
    const response = script.respond({ head, body }, seen.length - 1);
    discarding = script.early === true;
    if (response === null) socket.destroy();
    else await drip(socket, response, script.pieceBytes ?? 5);
    if (script.close || script.early) socket.end();
    busy = false;
    if (received.length > 0 && !discarding) await pump();
  };
  socket.on('data', (chunk: Buffer) => {
    if (discarding) return;
    received.push(chunk);
    void pump();
  });
  socket.on('error', () => undefined);
}

export interface Scripted {
  readonly target: Target;
  readonly seen: SeenRequest[];
}

interface Teardown {
  teardown(fn: () => void): void;
}

export async function scriptedServer(t: Teardown, script: Script): Promise<Scripted> {
  const seen: SeenRequest[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    handleConnection(socket, script, seen);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return { target: parseTarget(`http://127.0.0.1:${address.port}`), seen };
}

export function contentLengthResponse(body: Buffer, extra = ''): Buffer {
  return Buffer.concat([
    Buffer.from(
      'HTTP/1.1 200 OK\r\nX-Test: yes\r\n' + `Content-Length: ${body.length}\r\n${extra}\r\n`,
      'latin1',
    ),
    body,
  ]);
}

export function chunkedResponse(body: Buffer, chunkBytes: number): Buffer {
  const parts = [Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', 'latin1')];
  for (let offset = 0; offset < body.length; offset += chunkBytes) {
    const piece = body.subarray(offset, offset + chunkBytes);
    const size = Buffer.from(`${piece.length.toString(16)};ext=1\r\n`, 'latin1');
    parts.push(size, Buffer.from(piece), Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\nX-Trailer: done\r\n\r\n', 'latin1'));
  return Buffer.concat(parts);
}
