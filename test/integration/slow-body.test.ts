// Goal: an upload slower than uWebSockets.js's own floor (16 KB a second over its 10 s idle
// timer) but faster than `limits.body_rate_min` (1 KiB a second by default) completes and reads
// back exactly, also after a fast start and after the arena's flow control paused it, and so
// does a JSON body; one slower than the setting is cut when the timer runs out and stores
// nothing.
// Method: `lightwell serve` on loopback; raw sockets that write a PUT's body in small pieces
// every 250 ms for longer than the 10 s timer, all at once.
import t from 'tap';
import { connect } from 'node:net';
import { Service } from '../helpers/service.js';

// Each test has a service of its own and spends its time waiting on trickled bodies (13 s and
// more): both run at once.
t.jobs = 2;

const BUCKET = 'slow';
const STEP_MS = 250;

interface Outcome {
  /** The status line's code, 0 when the connection closed without an answer. */
  readonly status: number;
  readonly sent: number;
  readonly seconds: number;
}

/**
 * PUTs `head + rate × seconds` bytes: `head` at once, the rest `rate` bytes a second in pieces
 * every STEP_MS. Resolves when the connection closes or answers.
 */
function slowPut(
  port: number,
  token: string,
  key: string,
  body: { head: number; rate: number; seconds: number },
): Promise<Outcome & { bytes: Buffer }> {
  const bytes = Buffer.alloc(body.head + body.rate * body.seconds);
  for (let i = 0; i < bytes.length; i += 1) bytes[i] = (i * 31 + key.length) & 0xff;
  const head = `PUT /api/v1/buckets/${BUCKET}/objects/${key} HTTP/1.1\r\n`;
  return slowRequest(port, token, head, bytes, body);
}

/** Sends `head` and `bytes` (Authorization and Content-Length added) as slowPut does. */
function slowRequest(
  port: number,
  token: string,
  head: string,
  bytes: Buffer,
  body: { head: number; rate: number },
): Promise<Outcome & { bytes: Buffer; text: string }> {
  return new Promise((resolve) => {
    const startedAt = Date.now();
    const socket = connect(port, '127.0.0.1');
    let sent = 0;
    let text = '';
    const finish = (): void => {
      clearInterval(timer);
      socket.destroy();
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, sent, seconds: (Date.now() - startedAt) / 1000, bytes, text });
    };
    socket.on('data', (data: Buffer) => {
      text += data.toString('latin1');
      if (text.includes('\r\n\r\n')) setTimeout(finish, 50);
    });
    socket.on('error', finish);
    socket.on('close', finish);
    socket.write(
      `${head}Host: x\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Length: ${bytes.length}\r\n\r\n`,
    );
    socket.write(bytes.subarray(0, body.head));
    sent = body.head;
    const piece = Math.ceil((body.rate * STEP_MS) / 1000);
    const timer = setInterval(() => {
      if (socket.destroyed || sent >= bytes.length) return;
      const next = Math.min(bytes.length, sent + piece);
      socket.write(bytes.subarray(sent, next));
      sent = next;
    }, STEP_MS);
  });
}

t.test('slow request bodies', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const port = Number(new URL(service.publicUrl).port);
  const client = await service.tenant('slow-bodies');
  t.equal((await client.request('POST', '/buckets', { json: { name: BUCKET } })).status, 201);

  // A batch delete of 1,000 keys: about 53 KB of JSON, 13 s at 4 KB a second.
  const keys = Array.from({ length: 1000 }, (_, i) => ({
    key: `gone-${String(i).padStart(30, '0')}`,
  }));
  const batch = Buffer.from(JSON.stringify({ objects: keys }));
  const batchHead =
    `POST /api/v1/buckets/${BUCKET}/objects:batchDelete HTTP/1.1\r\n` +
    'Content-Type: application/json\r\n';
  const [steady, fastThenSlow, tooSlow, slowJson] = await Promise.all([
    slowPut(port, client.token, 'steady', { head: 0, rate: 4000, seconds: 13 }),
    slowPut(port, client.token, 'fast-then-slow', { head: 400_000, rate: 4000, seconds: 13 }),
    // Longer than the cut can come, so that it never completes first.
    slowPut(port, client.token, 'too-slow', { head: 0, rate: 400, seconds: 30 }),
    slowRequest(port, client.token, batchHead, batch, { head: 0, rate: 4000 }),
  ]);

  for (const [name, outcome] of [
    ['steady', steady],
    ['fast-then-slow', fastThenSlow],
  ] as const) {
    t.equal(outcome.status, 200, `${name}: 4 KB a second for 13 s is stored`);
    t.equal(outcome.sent, outcome.bytes.length, `${name}: the whole body was sent`);
    const read = await client.get(BUCKET, name);
    t.equal(read.status, 200);
    t.ok(read.bytes.equals(outcome.bytes), `${name}: reads back`);
  }
  t.equal(tooSlow.status, 0, '400 bytes a second: cut without an answer');
  t.ok(tooSlow.sent < tooSlow.bytes.length, 'before the body was complete');
  // uSockets checks its timers every 4 s, so a 10 s timeout fires after 8 to 12 s; the upper
  // bound leaves room for a loaded machine, not for a second timer period.
  t.ok(
    tooSlow.seconds >= 7.5 && tooSlow.seconds < 16,
    `cut by the idle timer (${tooSlow.seconds} s)`,
  );
  t.equal((await client.get(BUCKET, 'too-slow')).status, 404, 'nothing of it is stored');
  t.ok(slowJson.seconds > 11, `the JSON body took ${slowJson.seconds} s`);
  t.equal(slowJson.status, 200, 'a JSON body at 4 KB a second is read');
  const results = JSON.parse(slowJson.text.slice(slowJson.text.indexOf('\r\n\r\n') + 4)) as {
    deleted: unknown[];
  };
  t.equal(results.deleted.length, keys.length, 'every key has its result');
});

t.test('a body throttled by the arena, then slow, completes', async (t) => {
  // 16 MiB of arena is one large upload's reserve: a 40 MiB burst has to pause for the stored
  // chunks' blocks to come back, and the slow tail then has to keep the timer armed itself.
  const service = await Service.start({ args: ['--limits.inflight_bytes_max', '16MiB'] });
  t.teardown(() => service.close());
  const port = Number(new URL(service.publicUrl).port);
  const client = await service.tenant('slow-after-pause');
  t.equal((await client.request('POST', '/buckets', { json: { name: BUCKET } })).status, 201);
  const outcome = await slowPut(port, client.token, 'burst-then-slow', {
    head: 40 * 1024 * 1024,
    rate: 4000,
    seconds: 13,
  });
  t.equal(outcome.status, 200, `stored after ${outcome.seconds} s`);
  t.ok(outcome.seconds > 12, 'the slow tail outlasted the idle timer');
  const read = await client.get(BUCKET, 'burst-then-slow');
  t.ok(read.bytes.equals(outcome.bytes), 'reads back');
});
