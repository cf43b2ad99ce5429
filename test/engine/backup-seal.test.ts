// Goal: the sealed files of a tenant backup (src/engine/backup-seal.ts) give back exactly what
// was written, and refuse as corrupt_data any change a holder of the backup could make: a
// flipped byte, a truncated or extended file, frames reordered, a file swapped for another, the
// wrong data key; the data key opens only under the master key that wrapped it. The records file
// (tenant-backup-records.ts) refuses a list without its end record or with one after it.
// Method: files in a scratch directory, sizes around the frame boundary.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  FRAME_BYTES,
  SealedWriter,
  newBackupKey,
  newFileNonce,
  readSealed,
  unwrapBackupKey,
} from '../../src/engine/backup-seal.js';
import { RecordsWriter, readRecords } from '../../src/engine/tenant-backup-records.js';

const scratch = mkdtempSync(join(tmpdir(), 'lw-backup-seal-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
const key = randomBytes(32);
let files = 0;

async function seal(plain: Buffer, pieces = 3): Promise<{ path: string; nonce: string }> {
  files += 1;
  const path = join(scratch, `f${String(files)}`);
  const nonce = newFileNonce();
  const writer = await SealedWriter.create(path, key, nonce);
  const step = Math.ceil(plain.length / pieces) || 1;
  for (let at = 0; at < plain.length; at += step) await writer.write(plain.subarray(at, at + step));
  const sealed = await writer.finish();
  t.equal(sealed.plainBytes, plain.length);
  return { path, nonce };
}

async function open(path: string, nonce: string, withKey = key): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of readSealed(path, withKey, nonce)) parts.push(part);
  return Buffer.concat(parts);
}

const refused = (run: Promise<unknown>) =>
  run.then(
    () => 'opened',
    (error: unknown) => (error as { code?: string }).code,
  );

t.test('what is sealed opens byte-exact, at every size around a frame', async (t) => {
  for (const size of [0, 1, FRAME_BYTES - 1, FRAME_BYTES, FRAME_BYTES + 1, 2 * FRAME_BYTES + 7]) {
    const plain = randomBytes(size);
    const { path, nonce } = await seal(plain);
    t.ok((await open(path, nonce)).equals(plain), `${String(size)} bytes`);
    t.notOk(readFileSync(path).includes(plain.subarray(0, 64)) && size >= 64, 'not in clear');
  }
});

t.test('any change is corrupt_data', async (t) => {
  const plain = randomBytes(2 * FRAME_BYTES + 100);
  const { path, nonce } = await seal(plain);
  const stored = readFileSync(path);
  const variant = (name: string, bytes: Buffer) => {
    const target = join(scratch, name);
    writeFileSync(target, bytes);
    return target;
  };
  const flipped = Buffer.from(stored);
  flipped[FRAME_BYTES + 5] = (flipped[FRAME_BYTES + 5] ?? 0) ^ 1;
  t.equal(await refused(open(variant('flipped', flipped), nonce)), 'corrupt_data', 'a byte');
  const frame = FRAME_BYTES + 16;
  t.equal(
    await refused(open(variant('short', stored.subarray(0, 2 * frame)), nonce)),
    'corrupt_data',
    'cut at a frame boundary',
  );
  t.equal(
    await refused(open(variant('shorter', stored.subarray(0, stored.length - 1)), nonce)),
    'corrupt_data',
    'cut by a byte',
  );
  t.equal(
    await refused(open(variant('longer', Buffer.concat([stored, Buffer.alloc(3)])), nonce)),
    'corrupt_data',
    'extended',
  );
  const swapped = Buffer.concat([
    stored.subarray(frame, 2 * frame),
    stored.subarray(0, frame),
    stored.subarray(2 * frame),
  ]);
  t.equal(await refused(open(variant('swapped', swapped), nonce)), 'corrupt_data', 'reordered');
  const other = await seal(randomBytes(500));
  t.equal(await refused(open(other.path, nonce)), 'corrupt_data', 'another file for this one');
  t.equal(await refused(open(path, nonce, randomBytes(32))), 'corrupt_data', 'another key');
});

t.test('the data key opens only under the master key that wrapped it', async (t) => {
  const master = randomBytes(32);
  const { key: dataKey, record } = newBackupKey(master, 'fp-one');
  t.ok(unwrapBackupKey(master, 'fp-one', record).equals(dataKey));
  t.throws(() => unwrapBackupKey(randomBytes(32), 'fp-two', record), { code: 'corrupt_data' });
  t.throws(() => unwrapBackupKey(randomBytes(32), 'fp-one', record), { code: 'corrupt_data' });
});

t.test('the records file: whole, in order, nothing after its end', async (t) => {
  const write = async (lines: object[]) => {
    files += 1;
    const path = join(scratch, `r${String(files)}`);
    const nonce = newFileNonce();
    const writer = await RecordsWriter.create(path, key, nonce);
    for (const line of lines) await writer.add(line as never);
    await writer.finish();
    return { path, nonce };
  };
  const header = { type: 'header', format: 'lightwell-tenant-backup', version: 2, tenantId: 'a' };
  const end = { type: 'end', buckets: 1, versions: 0, skipped: 0, bytes: 0 };
  const bucket = { type: 'bucket', name: 'b'.repeat(60) + 'é'.repeat(40) };
  const whole = await write([header, ...Array.from({ length: 20_000 }, () => bucket), end]);
  let count = 0;
  const records = readRecords(whole.path, key, whole.nonce, 'a');
  for (;;) {
    const step = await records.next();
    if (step.done === true) {
      t.same(step.value, end, 'the end record is answered last');
      break;
    }
    if ((step.value as { name: string }).name === bucket.name) count += 1;
  }
  t.equal(count, 20_000, 'every record whole, across frames and split characters');
  const drain = async (file: { path: string; nonce: string }) => {
    for await (const _record of readRecords(file.path, key, file.nonce, 'a'));
  };
  t.equal(await refused(drain(await write([header, bucket]))), 'corrupt_data', 'no end');
  t.equal(await refused(drain(await write([header, end, bucket]))), 'corrupt_data', 'after end');
  t.equal(await refused(drain(await write([bucket, end]))), 'corrupt_data', 'no header');
  t.equal(
    await refused(drain(await write([{ ...header, version: 3 }, end]))),
    'corrupt_data',
    'another version',
  );
  t.equal(
    await refused(drain(await write([{ ...header, tenantId: 'b' }, end]))),
    'corrupt_data',
    'the header names another tenant than the manifest',
  );
});
