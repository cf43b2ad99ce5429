// Goal: a listener whose receive buffer is capped gets its connections' bytes after `pause()`
// one read at a time: uWebSockets.js stops reading a paused socket at the first short read, so
// with a buffer under its 512 KiB read size a pause is followed by at most the rest of one read
// (in practice: a read is not strictly bounded by the buffer, but by what the kernel holds and
// receives while it copies, within the window it advertised).
// Method: real uWS listeners on loopback, capped with `setReceiveBuffer` and not; a raw client
// writes 192 MiB as fast as the socket takes it, the handler pauses every 8 MiB for 20 ms and
// counts what arrives while it is paused. Only the capped listener's numbers are asserted; the
// uncapped ones depend on how fast the client refills the queue, and are printed.
import t from 'tap';
import * as uWS from 'uWebSockets.js';
import { Exchange } from '../../src/http/exchange.js';
import { receiveBufferOf, setReceiveBuffer } from '../../src/http/receive-buffer.js';
import { rawUpload } from '../helpers/raw-upload.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const BODY_BYTES = 192 * MiB;
const PAUSE_EVERY_BYTES = 8 * MiB;
const PAUSED_MS = 20;

interface Listener {
  readonly port: number;
  /** Bytes delivered while paused, per pause. */
  readonly afterPause: number[];
  close(): void;
}

async function pausingListener(receiveBytes: number | undefined): Promise<Listener> {
  const afterPause: number[] = [];
  const app = uWS.App().put('/*', (res, req) => {
    const exchange = new Exchange(res, req);
    let received = 0;
    let sincePause = 0;
    let paused = false;
    let pausedBytes = 0;
    res.onData((chunk, isLast) => {
      received += chunk.byteLength;
      if (paused) {
        pausedBytes += chunk.byteLength;
        exchange.keepPaused();
      } else if ((sincePause += chunk.byteLength) >= PAUSE_EVERY_BYTES && !isLast) {
        paused = true;
        sincePause = 0;
        pausedBytes = 0;
        exchange.pauseReading();
        setTimeout(() => {
          afterPause.push(pausedBytes);
          paused = false;
          exchange.resumeReading();
        }, PAUSED_MS);
      }
      if (isLast) exchange.send(200, {}, String(received));
    });
  });
  const port = await new Promise<number>((resolve, reject) =>
    app.listen('127.0.0.1', 0, (socket) => {
      if (!socket) return reject(new TypeError('listen failed'));
      const port = uWS.us_socket_local_port(socket);
      if (receiveBytes !== undefined) {
        const result = setReceiveBuffer(port, receiveBytes);
        if (!result.set) return reject(new TypeError(result.reason));
      }
      resolve(port);
    }),
  );
  return { port, afterPause, close: () => app.close() };
}

t.test('the cap is set on the listening socket', async (t) => {
  const listener = await pausingListener(128 * KiB);
  t.teardown(() => listener.close());
  // Linux doubles SO_RCVBUF for its own bookkeeping and reports the doubled value.
  t.same(receiveBufferOf(listener.port), [256 * KiB], 'one listening socket, 2 × 128 KiB');
  const result = setReceiveBuffer(listener.port, 64 * KiB);
  t.same(result, { set: true, sockets: 1, kernelBytes: 128 * KiB }, 'set again');
  t.same(setReceiveBuffer(1, 64 * KiB), { set: false, reason: 'no listening socket on port 1' });
});

t.test('a capped connection delivers at most one read after each pause', async (t) => {
  const capped = await pausingListener(256 * KiB);
  const uncapped = await pausingListener(undefined);
  t.teardown(() => {
    capped.close();
    uncapped.close();
  });
  t.match(
    await rawUpload(capped.port, BODY_BYTES),
    /^HTTP\/1\.1 200 /,
    'the capped upload completes',
  );
  t.match(
    await rawUpload(uncapped.port, BODY_BYTES),
    /^HTTP\/1\.1 200 /,
    'the uncapped upload completes',
  );
  t.ok(capped.afterPause.length >= 20, `${capped.afterPause.length} pauses`);
  const most = Math.max(...capped.afterPause);
  t.ok(most < 512 * KiB, `capped: at most ${most} bytes arrived after a pause`);
  t.comment(`uncapped: at most ${Math.max(...uncapped.afterPause)} bytes after a pause`);
});
