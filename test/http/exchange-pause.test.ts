// Goal: a request body paused for longer than uWebSockets.js's 10 s idle timeout keeps its
// connection. uWS goes on delivering the socket's receive buffer after `pause()` and re-arms
// the timer for every 160 KB it delivers; `keepPaused` on each such delivery stops it again.
// Method: a real uWS listener on loopback whose handler streams a body through an Exchange,
// pauses after 64 MiB (the kernel's receive buffer has grown by then, so more arrives after the
// pause), and stays paused for 12 s; a raw client keeps writing. The connection must still be
// open and the body must then complete with a response.
import t from 'tap';
import * as uWS from 'uWebSockets.js';
import { setTimeout as delay } from 'node:timers/promises';
import { Exchange } from '../../src/http/exchange.js';
import { rawUpload } from '../helpers/raw-upload.js';

const MiB = 1024 * 1024;
const BODY_BYTES = 96 * MiB;
const PAUSE_AFTER_BYTES = 64 * MiB;
const PAUSED_MS = 12_000;

t.test('a paused body outlives the idle timeout', async (t) => {
  let afterPause = 0;
  let aborted = false;
  const app = uWS.App().put('/*', (res, req) => {
    const exchange = new Exchange(res, req);
    exchange.onAbort(() => (aborted = true));
    let received = 0;
    let paused = false;
    res.onData((chunk, isLast) => {
      received += chunk.byteLength;
      if (paused) {
        afterPause += chunk.byteLength;
        exchange.keepPaused();
      } else if (received >= PAUSE_AFTER_BYTES) {
        paused = true;
        exchange.pauseReading();
        setTimeout(() => exchange.resumeReading(), PAUSED_MS);
      }
      if (isLast) exchange.send(200, {}, String(received));
    });
  });
  const port = await new Promise<number>((resolve) =>
    app.listen('127.0.0.1', 0, (socket) => resolve(uWS.us_socket_local_port(socket))),
  );
  t.teardown(() => app.close());
  const response = await rawUpload(port, BODY_BYTES);
  t.match(response, /^HTTP\/1\.1 200 /, 'the body completed after the pause');
  t.notOk(aborted, 'the request was never aborted');
  t.ok(afterPause >= 160 * 1024, `uWS delivered ${afterPause} bytes after the pause`);
  await delay(0);
});
