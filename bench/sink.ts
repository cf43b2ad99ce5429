// The HTTP sink: a uWebSockets.js app, run as a child process by limits.ts, that shows what the
// server library alone can do on this machine, so that Lightwell's numbers can be read as a
// fraction of it.
//
// - PUT/POST /*: reads and discards the body, answers `ok` (Lightwell's gateway minus all work).
// - GET /tiny: answers `ok` (the cheapest request: request-rate ceiling).
// - GET /blob/<size>: streams <size> bytes of a fixed random template, repeated, with uWS
//   backpressure (tryEnd and onWritable), so the client can verify their CRC32.
//
// It prints one JSON line `{"ready":true,"port":P}` when listening and exits when its stdin
// closes (the parent ended or dropped it). It keeps no state and writes nothing to disk.

import * as uWS from 'uWebSockets.js';
import { makeTemplate, SINK_SOURCE_SEED, TEMPLATE_BYTES } from './data.js';

const PIECE_BYTES = 1024 * 1024;
const template = makeTemplate('random', TEMPLATE_BYTES, SINK_SOURCE_SEED);

function discardBody(res: uWS.HttpResponse): void {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  res.onData((_chunk, isLast) => {
    if (isLast && !aborted) res.cork(() => res.end('ok'));
  });
}

interface BlobState {
  aborted: boolean;
  /** Body bytes fully handed to uWS. */
  offset: number;
  readonly size: number;
  /** The piece that uWS took only in part, and the write offset before it was offered. */
  pending: Buffer | null;
  pendingWriteOffset: number;
}

function pieceAt(offset: number, size: number): Buffer {
  const from = offset % template.length;
  const count = Math.min(size - offset, template.length - from, PIECE_BYTES);
  return template.subarray(from, from + count);
}

/** Offers pieces until uWS pushes back; the rest continues from onWritable. */
function pumpBlob(res: uWS.HttpResponse, state: BlobState): void {
  while (!state.aborted && state.offset < state.size) {
    const piece = pieceAt(state.offset, state.size);
    const writeOffset = res.getWriteOffset();
    const [ok, done] = res.tryEnd(piece, state.size);
    if (done) return;
    if (!ok) {
      state.pending = piece;
      state.pendingWriteOffset = writeOffset;
      return;
    }
    state.offset += piece.length;
  }
}

/**
 * The one onWritable handler of a response. uWS restores the handler that was running after it
 * returns, so a handler registered from inside it would be lost: state lives in `state`.
 */
function onBlobWritable(res: uWS.HttpResponse, state: BlobState, writeOffset: number): boolean {
  const piece = state.pending;
  if (state.aborted || piece === null) return true;
  const [ok, done] = res.tryEnd(piece.subarray(writeOffset - state.pendingWriteOffset), state.size);
  if (done) return true;
  if (!ok) return false;
  state.pending = null;
  state.offset += piece.length;
  pumpBlob(res, state);
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- pumpBlob may set it
  return state.pending === null;
}

function serveBlob(res: uWS.HttpResponse, req: uWS.HttpRequest): void {
  const size = Number(req.getParameter(0));
  const state: BlobState = {
    aborted: false,
    offset: 0,
    size,
    pending: null,
    pendingWriteOffset: 0,
  };
  res.onAborted(() => {
    state.aborted = true;
  });
  if (!Number.isSafeInteger(size) || size < 0) {
    res.writeStatus('400 Bad Request').end('bad size');
    return;
  }
  if (size === 0) {
    res.end('');
    return;
  }
  res.onWritable((offset) => onBlobWritable(res, state, offset));
  pumpBlob(res, state);
}

const app = uWS
  .App()
  .put('/*', discardBody)
  .post('/*', discardBody)
  .get('/tiny', (res) => {
    res.end('ok');
  })
  .get('/blob/:size', serveBlob)
  .any('/*', (res) => {
    res.writeStatus('404 Not Found').end('not found');
  });

app.listen('127.0.0.1', 0, (listenSocket) => {
  if (listenSocket === false) {
    process.stderr.write('sink: cannot listen\n');
    process.exitCode = 1;
    return;
  }
  const port = uWS.us_socket_local_port(listenSocket);
  process.stdout.write(`${JSON.stringify({ ready: true, port })}\n`);
});

process.stdin.on('end', () => app.close());
process.stdin.resume();
