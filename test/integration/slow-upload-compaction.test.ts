// Goal: compaction never deletes the records of an upload still in flight. Until its manifest
// commits, no chunk entry points at an upload's records, so a sealed segment holding only those
// looked empty: the compactor retired it and deleted it after the retired grace, and the slow
// upload's commit then failed with a 500 (every retry at the same speed too). The gateway now
// pins the segments its unfinished uploads wrote to (upload-pins.ts, segment-pins.ts).
// Method: a service with small segments, a compaction pass every second and a one-second
// retired grace; several fresh-content uploads each sent over ~8 s, so their first segments
// are sealed, judged 0% live, retired and past their grace long before the commit. Every one
// must answer 200 and read back byte-exact, and the service log must hold no error.
import t from 'tap';
import { request } from 'node:http';
import { randomBytes, createHash } from 'node:crypto';
import { Service } from '../helpers/service.js';
import { PIN_REPORT_INTERVAL_MS } from '../../src/engine/segments/segment-pins.js';

const PIECES = 32;
const SECONDS = 8;

/** PUTs `body` in PIECES writes spread over SECONDS; resolves with the status and answer. */
function slowPut(
  port: number,
  token: string,
  path: string,
  body: Buffer,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'PUT',
        path: `/api/v1${path}`,
        agent: false,
        headers: { Authorization: `Bearer ${token}`, 'Content-Length': String(body.length) },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (data: Buffer) => parts.push(data));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString() }),
        );
      },
    );
    req.on('error', (error) => resolve({ status: 0, text: String(error) }));
    const piece = Math.ceil(body.length / PIECES);
    let sent = 0;
    const tick = (): void => {
      req.write(body.subarray(sent * piece, (sent + 1) * piece));
      sent += 1;
      if (sent >= PIECES) req.end();
      else setTimeout(tick, (SECONDS * 1000) / PIECES);
    };
    tick();
  });
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

t.test('slow uploads commit although compaction retires their segments meanwhile', async (t) => {
  const startedAt = Date.now();
  const service = await Service.start({
    args: [
      '--storage.segment_bytes_max',
      '4MiB',
      '--storage.compaction_interval',
      '1s',
      '--storage.retired_segment_grace',
      '1s',
      '--storage.compaction_live_ratio',
      '0.99',
    ],
  });
  t.teardown(() => service.close());
  const client = await service.tenant('slowpoke');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'slow' } })).status, 201);

  // A fresh engine deletes nothing until its gateways have had the time to report their pins
  // (two report intervals): the uploads start after that, or the test could not fail.
  const settledAt = startedAt + 2 * PIN_REPORT_INTERVAL_MS + 500;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, settledAt - Date.now())));
  const bodies = Array.from({ length: 3 }, () => randomBytes(24 * 1024 * 1024));
  const port = Number(new URL(service.publicUrl).port);
  const answers = await Promise.all(
    bodies.map((body, i) => slowPut(port, client.token, `/buckets/slow/objects/o${i}`, body)),
  );
  for (const [i, answer] of answers.entries()) {
    t.equal(answer.status, 200, `o${i}: ${answer.text.slice(0, 200)}`);
    const read = await client.get('slow', `o${i}`);
    t.equal(read.status, 200);
    t.equal(sha256(read.bytes), sha256(bodies[i] as Buffer), `o${i} reads back byte-exact`);
  }
  t.notMatch(service.output, /"level":50/, 'no error in the service log');
});
