// Goal: a full data filesystem never wedges or kills the service. New writes are refused with
// 503 and Retry-After (nothing of them acknowledged), reads, listings, deletes and the admin
// plane go on, deleting objects gives space back, and writes resume without a restart.
// Method: `lightwell serve` on a 96 MiB tmpfs (mounted here; the test skips, saying why, where
// it cannot mount one), filled with 1 MiB PUTs until they are refused; then reads of every
// acknowledged object, deletes of half of them, and PUTs until one succeeds again (the space
// reserve lets compaction reclaim what the deletes freed: src/engine/space-reserve.ts).
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { Service } from '../helpers/service.js';

const MiB = 1024 * 1024;

/** A 96 MiB tmpfs for the data directory, or why there cannot be one here. */
function smallFilesystem(): { dir: string } | { skip: string } {
  const dir = mkdtempSync(join(tmpdir(), 'lw-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=96m', 'tmpfs', dir], { stdio: 'pipe' });
    return { dir };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    return { skip: `cannot mount a small tmpfs to fill: ${String(error).split('\n')[0] ?? ''}` };
  }
}

const small = smallFilesystem();
if ('dir' in small)
  t.teardown(() => {
    execFileSync('umount', ['-l', small.dir]);
    rmSync(small.dir, { recursive: true, force: true });
  });

const digest = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

const skip = 'skip' in small ? small.skip : false;
t.test('a full disk refuses writes, keeps reads and deletes, and recovers', { skip }, async (t) => {
  if (!('dir' in small)) return;
  // Dead chunks are kept reusable for a grace period (15 min by default) before compaction may
  // reclaim them: shortened here, with the compaction interval, so that space comes back soon.
  const service = await Service.start({
    dataDir: join(small.dir, 'data'),
    args: ['--storage.dead_chunk_grace', '1s', '--storage.compaction_interval', '1s'],
  });
  t.teardown(() => service.close());
  const client = await service.tenant('acme');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'fill' } })).status, 201);

  const stored = new Map<string, string>();
  let refusal: Awaited<ReturnType<typeof client.put>> | undefined;
  for (let i = 0; i < 200 && refusal === undefined; i += 1) {
    const body = randomBytes(MiB);
    const answer = await client.put('fill', `object-${i}`, body);
    if (answer.status === 200) stored.set(`object-${i}`, digest(body));
    else refusal = answer;
  }
  if (refusal === undefined) throw new Error('200 MiB of PUTs never filled a 96 MiB disk');
  t.comment(`${stored.size} objects stored before the disk was full`);
  t.equal(refusal.status, 503, 'a write on a full disk is refused with 503');
  t.ok(refusal.headers.get('retry-after'), 'with Retry-After');
  for (let i = 0; i < 3; i += 1) {
    const again = await client.put('fill', 'while-full', randomBytes(MiB));
    t.equal(again.status, 503, `a write while full is refused again (${i + 1})`);
  }

  for (const [key, sum] of stored) {
    const read = await client.get('fill', key);
    if (read.status !== 200 || digest(read.bytes) !== sum) t.fail(`${key} reads back`);
  }
  t.pass('every acknowledged object reads back while the disk is full');
  const listed = await client.request('GET', '/buckets/fill/objects?maxKeys=1000');
  t.equal(listed.status, 200, 'a listing works while full');
  t.equal(
    (await service.admin('GET', '/tenants', service.adminToken())).status,
    200,
    'the admin plane works while full',
  );

  const keys = [...stored.keys()];
  for (const key of keys.slice(0, Math.ceil(keys.length / 2))) {
    const deleted = await client.request('DELETE', `/buckets/fill/objects/${key}`);
    t.equal(deleted.status, 204, `delete ${key} while full`);
    stored.delete(key);
  }

  // Compaction runs each second here; reclaiming takes a few passes, and the gateways' cached
  // handles of deleted segments hold their blocks until they are closed (10 s idle). Polled,
  // each refusal a 503 with nothing acknowledged, for up to 120 attempts half a second apart.
  let resumed = false;
  let attempts = 0;
  while (attempts < 120 && !resumed) {
    attempts += 1;
    const answer = await client.put('fill', 'after', randomBytes(MiB));
    resumed = answer.status === 200;
    if (!resumed) {
      t.equal(answer.status, 503, 'refused with 503 until then');
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  if (!resumed) t.comment(service.output.slice(-12_000));
  t.ok(resumed, `writes resume without a restart once deletes freed space (${attempts} tries)`);
  for (const [key, sum] of stored) {
    const read = await client.get('fill', key);
    if (read.status !== 200 || digest(read.bytes) !== sum) t.fail(`${key} reads back after`);
  }
  t.pass('the objects kept read back after');
});
