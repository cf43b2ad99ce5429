// Goal: a replayed body is checked against every digest the request declared, and settles once
// whole, short or abandoned. Method: feed ReplayBody bytes in pieces, as the upload does.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { crc32 } from '@node-rs/crc32';
import { ReplayBody } from '../../src/service/idempotency.js';
import { BadRequest, errorCode } from '../../src/util/errors.js';
import type { ChecksumAlg } from '../../src/engine/checksums.js';

const crc32Of = (bytes: Buffer): Buffer => {
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc32(bytes) >>> 0);
  return digest;
};
const sha256Of = (bytes: Buffer): Buffer => createHash('sha256').update(bytes).digest();

async function replay(expected: Map<ChecksumAlg, Buffer>, body: Buffer): Promise<unknown> {
  const sink = await ReplayBody.of(expected);
  for (let at = 0; at < body.length; at += 1000) sink.write(body.subarray(at, at + 1000));
  sink.end();
  return sink.checked.then(
    () => 'replayed',
    (error: unknown) => errorCode(error),
  );
}

t.test('the first body replays; any other body is a reuse', async (t) => {
  const body = randomBytes(10_000);
  const expected = new Map<ChecksumAlg, Buffer>([
    ['CRC32', crc32Of(body)],
    ['SHA256', sha256Of(body)],
  ]);
  t.equal(await replay(expected, body), 'replayed');
  const other = Buffer.from(body);
  other.writeUInt8(other.readUInt8(5000) ^ 0x40, 5000);
  t.equal(await replay(expected, other), 'idempotency_key_reused');
  t.equal(await replay(expected, body.subarray(1)), 'idempotency_key_reused');
});

t.test('every declared digest must match, not only the cheapest', async (t) => {
  // A body whose CRC32 matches but whose SHA-256 does not: what a CRC collision would give.
  const body = randomBytes(4096);
  const expected = new Map<ChecksumAlg, Buffer>([
    ['CRC32', crc32Of(body)],
    ['SHA256', sha256Of(randomBytes(16))],
  ]);
  t.equal(await replay(expected, body), 'idempotency_key_reused');
});

t.test('a body that never completes settles with its error', async (t) => {
  const sink = await ReplayBody.of(new Map<ChecksumAlg, Buffer>([['CRC64NVME', Buffer.alloc(8)]]));
  sink.write(randomBytes(100));
  sink.end(BadRequest('the client went away'));
  await t.rejects(sink.checked, { code: 'bad_request', message: 'the client went away' });
  await t.rejects(ReplayBody.of(new Map()), { code: 'bad_request' });
});
