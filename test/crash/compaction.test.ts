// Goal: compaction is crash-safe and reclaims space. With small segments (1 MiB), a 200 ms
// compaction interval, a live ratio of 0.9 (most sealed segments qualify), no grace for dead
// chunks and 1 s for retired segments, overwrites and
// deletes keep compaction busy; the whole service is killed with SIGKILL while compaction is
// copying records or while compacted segments wait for deletion, and restarted. Every
// acknowledged object must read back byte-exact, the index's reference counts and live bytes
// stay exact, segments retired before the crash are deleted after it, deduplication still
// works on moved chunks, and once the objects are deleted their segment files are deleted too.
// Method: `lightwell serve` as a child process; 10 client lanes over 40 keys (ledger and
// verifier of crash-kit.ts). Each round waits for a moment of compaction seen from outside:
// the engine's own open segment growing (a copy in progress) or a retired segment present
// (between the move and the delete), polled read-only in the index and the directory every
// 15 ms, then stops and kills the whole tree at once.
import t from 'tap';
import { PIN_REPORT_INTERVAL_MS } from '../../src/engine/segments/segment-pins.js';
import { readFileSync, statSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Service } from '../helpers/service.js';
import {
  HttpClient,
  Ledger,
  Bodies,
  startIngest,
  verifyAll,
  tornTails,
  segmentStates,
  segmentFiles,
  indexInvariants,
  chunkEntriesOf,
  sleep,
  eventually,
  sha256,
  MiB,
  KiB,
  type SegmentState,
  crashRandom,
  CRASH_SEED,
} from './crash-kit.js';
import { segmentFileName } from '../../src/format/segment-header.js';

const ROUNDS = 3;
const BUCKET = 'compaction';
const TENANT = 'crash-compaction';

type Moment = 'copying' | 'retired';

/** Polls until the engine is seen compacting in the way asked for; returns what was seen. */
async function compactionMoment(
  dataDir: string,
  want: Moment,
  timeoutMs: number,
): Promise<{ seen: boolean; retired: number; engineSegment?: number }> {
  const enginePid = Number(readFileSync(join(dataDir, 'engine.lock'), 'utf8').trim());
  const deadline = Date.now() + timeoutMs;
  let lastSize = new Map<number, number>();
  while (Date.now() < deadline) {
    let states: SegmentState[];
    try {
      states = await segmentStates(dataDir);
    } catch {
      await sleep(15);
      continue;
    }
    const retired = states.filter((segment) => segment.state === 'retired').length;
    const own = states.filter(
      (segment) => segment.state === 'open' && segment.ownerPid === enginePid,
    );
    const sizes = new Map<number, number>();
    for (const segment of own) {
      const path = join(dataDir, 'segments', segmentFileName(segment.id));
      if (existsSync(path)) sizes.set(segment.id, statSync(path).size);
    }
    const growing =
      [...sizes].find(([id, size]) => lastSize.has(id) && size > (lastSize.get(id) as number)) ??
      [...sizes].find(([id]) => !lastSize.has(id) && lastSize.size > 0);
    lastSize = sizes;
    if (want === 'copying' && growing) return { seen: true, retired, engineSegment: growing[0] };
    if (want === 'retired' && retired > 0) return { seen: true, retired };
    await sleep(15);
  }
  return { seen: false, retired: 0 };
}

t.test(
  'SIGKILL during compaction loses nothing, and space is reclaimed after restart',
  async (t) => {
    t.comment(`seed ${CRASH_SEED} (replay its choices with LIGHTWELL_CRASH_SEED=${CRASH_SEED})`);
    const service = await Service.start({
      args: [
        '--storage.segment_bytes_max',
        '1MiB',
        '--storage.chunk_bytes_avg',
        '256KiB',
        '--storage.compaction_interval',
        '200ms',
        '--storage.dead_chunk_grace',
        '0s',
        '--storage.retired_segment_grace',
        '1s',
        '--storage.compaction_live_ratio',
        '0.9',
        '--log-level',
        'info',
      ],
    });
    t.teardown(() => service.close());
    const tenant = await service.tenant(TENANT);
    t.equal((await tenant.request('POST', '/buckets', { json: { name: BUCKET } })).status, 201);
    const keys = Array.from({ length: 40 }, (_, index) => `c/${String(index).padStart(2, '0')}`);
    const ledger = new Ledger();
    const bodies = new Bodies(
      { empty: 1, small: 5, medium: 6, 'large-random': 3, 'large-compressible': 2, shared: 3 },
      { mediumBytes: 100 * KiB, largeMin: MiB / 2, largeMax: (5 * MiB) / 2 },
    );
    const seen: string[] = [];
    let tornSegments = 0;

    for (let round = 1; round <= ROUNDS; round += 1) {
      const client = new HttpClient(service.publicUrl, tenant.token);
      const ingest = startIngest({
        client: () => client,
        bucket: BUCKET,
        keys,
        lanes: 10,
        bodies,
        ledger,
        deleteShare: 0.25,
      });
      await sleep(1200 + crashRandom.int(1200));
      const want: Moment = round % 2 === 1 ? 'copying' : 'retired';
      const moment = await compactionMoment(service.dataDir, want, 4000);
      // kill9 stops and kills the whole tree before it returns its promise; the lanes stop after.
      const killed = service.kill9();
      const stopped = ingest.stop();
      await killed;
      client.destroy();
      await stopped;
      seen.push(
        `${want}:${moment.seen ? 'seen' : 'not seen'}${moment.retired ? ` (${moment.retired} retired)` : ''}`,
      );

      const before = await segmentStates(service.dataDir);
      const retiredAtKill = before
        .filter((segment) => segment.state === 'retired')
        .map((segment) => segment.id);
      const tails = await tornTails(service.dataDir);
      tornSegments += tails.filter((tail) => tail.validEnd < tail.fileSize).length;

      await service.launch();
      const reader = new HttpClient(service.publicUrl, tenant.token);
      const verified = await verifyAll(reader, BUCKET, ledger, bodies);
      reader.destroy();
      t.same(
        verified.failures,
        [],
        `round ${round} (killed ${String(seen.at(-1))}): every key holds an allowed state (${verified.keys} keys, ${verified.present} present, ${(verified.bytes / MiB).toFixed(1)} MiB)`,
      );

      const cleaned = await eventually(
        async () => {
          const states = await segmentStates(service.dataDir);
          return (
            retiredAtKill.every((id) => {
              const now = states.find((segment) => segment.id === id);
              return !now || now.state !== 'retired';
            }) && !states.some((segment) => segment.state === 'open' && !segment.ownerAlive)
          );
          // A restarted engine deletes nothing until its gateways could report their upload pins.
        },
        8000 + 2 * PIN_REPORT_INTERVAL_MS,
      );
      t.ok(
        cleaned,
        `round ${round}: the ${retiredAtKill.length} segments retired before the crash were deleted after it, and no dead writer's segment stays open`,
      );
      const files = await segmentFiles(service.dataDir);
      t.same(files.unknown, [], `round ${round}: every segment file is known to the index`);
      if (files.orphans.length > 0)
        t.comment(
          `round ${round}: quarantined ${files.orphans.join(', ')} (a crash between an index removal and its unlink)`,
        );
      const invariants = await indexInvariants(service.dataDir);
      t.same(
        invariants.violations,
        [],
        `round ${round}: reference counts and live bytes are exact (${invariants.liveChunks} live of ${invariants.chunks} chunks)`,
      );
      ledger.nextLifetime();
    }

    // Deduplication, also of chunks that compaction has moved.
    const client = new HttpClient(service.publicUrl, tenant.token);
    t.teardown(() => client.destroy());
    const body = crashRandom.bytes((3 * MiB) / 2);
    // Garbage-to-be next to the deduplicated chunks, so that compaction will move them; then
    // fillers that fill (and so seal) the open segments. Sent at once, so every worker gets some.
    const putAll = async (keys: readonly string[], bytes: number): Promise<boolean> =>
      (
        await Promise.all(keys.map((key) => client.put(BUCKET, key, crashRandom.bytes(bytes))))
      ).every((response) => response.status === 200);
    const fillers = Array.from({ length: 24 }, (_, index) => `filler/${index}`);
    t.ok(await putAll(fillers.slice(0, 12), 200 * KiB), 'garbage-to-be stored');
    t.equal((await client.put(BUCKET, 'dedup/one', body)).status, 200);
    t.equal((await client.put(BUCKET, 'dedup/two', body)).status, 200);
    const one = await chunkEntriesOf(service.dataDir, TENANT, BUCKET, 'dedup/one');
    const two = await chunkEntriesOf(service.dataDir, TENANT, BUCKET, 'dedup/two');
    t.ok(one.length > 1, `the body was cut into ${one.length} chunks`);
    t.same(
      two.map((chunk) => chunk.id),
      one.map((chunk) => chunk.id),
      'the second copy references the same chunks',
    );
    t.ok(
      two.every((chunk) => chunk.refs >= 2),
      'each referenced twice, stored once',
    );

    t.ok(await putAll(fillers.slice(12), MiB - 1000), 'fillers stored');

    // Space: delete every other object; the segments that held them are compacted and deleted.
    const before = await segmentFiles(service.dataDir);
    for (const key of [...ledger.keys(), ...fillers]) await client.delete(BUCKET, key);
    const settled = await eventually(
      async () =>
        (await segmentStates(service.dataDir)).every(
          (segment) =>
            segment.state !== 'retired' && !(segment.state === 'sealed' && segment.liveBytes === 0),
        ),
      10_000,
    );
    t.ok(settled, 'compaction settles once the garbage is gone');
    const middle = await segmentFiles(service.dataDir);
    const moved = await chunkEntriesOf(service.dataDir, TENANT, BUCKET, 'dedup/one');
    const movedCount = moved.filter(
      (chunk, index) => chunk.segmentId !== one[index]?.segmentId,
    ).length;
    t.equal((await client.put(BUCKET, 'dedup/three', body)).status, 200);
    const three = await chunkEntriesOf(service.dataDir, TENANT, BUCKET, 'dedup/three');
    t.same(
      three.map((chunk) => chunk.id),
      one.map((chunk) => chunk.id),
      `a third copy after compaction (${movedCount} of ${one.length} chunks moved) still deduplicates`,
    );
    t.same(
      three.map((chunk) => `${chunk.segmentId}:${chunk.offset}`),
      moved.map((chunk) => `${chunk.segmentId}:${chunk.offset}`),
      'and points at the same records',
    );
    const read = await client.get(BUCKET, 'dedup/three');
    t.equal(sha256(read.body), sha256(body), 'it reads back');
    await client.delete(BUCKET, 'dedup/one');
    await client.delete(BUCKET, 'dedup/two');
    await client.delete(BUCKET, 'dedup/three');
    const reclaimed = await eventually(
      async () =>
        (await segmentStates(service.dataDir)).every((segment) => segment.state === 'open'),
      10_000,
    );
    const after = await segmentFiles(service.dataDir);
    const states = await segmentStates(service.dataDir);
    t.ok(
      reclaimed,
      `every sealed segment was compacted away (left: ${states.map((segment) => `${segment.id}:${segment.state}:${segment.liveBytes}`).join(' ')})`,
    );
    t.ok(
      after.bytes <= states.length * MiB + 64 * KiB,
      `only the open segments remain: ${after.files} files, ${(after.bytes / MiB).toFixed(2)} MiB`,
    );
    t.ok(
      after.files < before.files,
      `segment files were deleted: ${before.files} → ${middle.files} → ${after.files}`,
    );
    const invariants = await indexInvariants(service.dataDir);
    t.same(invariants.violations, [], 'the accounting is exact at the end');
    t.equal(invariants.liveChunks, 0, 'no live chunk is left');

    const { stats } = ledger;
    t.comment(
      `rounds ${ROUNDS}, kill moments: ${seen.join(', ')}; torn tails at kill: ${tornSegments}`,
    );
    t.comment(
      `acknowledged: ${stats.puts} PUTs (${(stats.putBytes / MiB).toFixed(1)} MiB), ${stats.deletes} DELETEs; refused ${stats.refused}; unknown ${stats.unknown} (found applied ${ledger.unknownApplied}, not applied ${ledger.unknownNotApplied}); statuses ${JSON.stringify(stats.statuses)}`,
    );
    t.comment(
      `segment files before the final deletes: ${before.files} (${(before.bytes / MiB).toFixed(1)} MiB), after the garbage was compacted: ${middle.files} (${(middle.bytes / MiB).toFixed(1)} MiB), after the last deletes: ${after.files} (${(after.bytes / MiB).toFixed(2)} MiB)`,
    );
    const compactionLines = service.output
      .split('\n')
      .filter((line) => line.includes('"compaction pass"'));
    t.comment(`compaction passes logged since the last restart: ${compactionLines.length}`);
  },
);
