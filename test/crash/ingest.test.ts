// Goal: a 2xx means durable. Over three rounds, the whole service (supervisor, engine, two
// gateways with their worker pools, admin) is killed with SIGKILL at a random moment of
// concurrent ingest and restarted on the same data directory; every write acknowledged with a
// 2xx must read back byte-exact, every acknowledged delete must stay deleted, and a write whose
// outcome the client never learned may or may not exist, but if it exists it is byte-exact
// (never torn, never another write's bytes). The segments a crash leaves are recovered: no open
// segment of a dead writer survives the restart, torn tails are cut at the last intact record
// and sealed with a footer, no segment file is unknown to the index, and the index's reference counts and live-byte
// accounting stay exact.
// Method: `lightwell serve` as a child process (test/helpers/service.ts); 12 client lanes over
// 48 keys PUT bodies of mixed sizes (0 B, up to 4 KiB, ~100 KiB, 2-5 MiB random or
// compressible, and a few shared bodies that deduplicate) and DELETE, one operation per key at
// a time, recording each outcome in a ledger (crash-kit.ts). The tree is stopped and killed at
// once; open segments are scanned before the restart; after it, every key is read (plus a
// Range read of known bodies) and the index is inspected read-only.
import t from 'tap';
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
  sleep,
  MiB,
  KiB,
  crashRandom,
  CRASH_SEED,
} from './crash-kit.js';
import { scanSegment } from '../../src/engine/segments/segment-scan.js';
import { segmentFileName } from '../../src/format/segment-header.js';
import { SEAL_RECORD_SIZE } from '../../src/format/seal-footer.js';
import { join } from 'node:path';
import { untilDeadline } from '../helpers/deadline.js';

const ROUNDS = 3;
/** Acknowledged PUTs each round waits for before its kill, on top of its random delay. */
const PUTS_PER_ROUND = 20;
const LANES = 12;
const BUCKET = 'ingest';

t.test(
  'acknowledged writes survive SIGKILL of the whole service in the middle of ingest',
  async (t) => {
    t.comment(`seed ${CRASH_SEED} (replay its choices with LIGHTWELL_CRASH_SEED=${CRASH_SEED})`);
    const service = await Service.start({
      gateways: 2,
      args: [
        '--storage.segment_bytes_max',
        '8MiB',
        '--storage.compaction_interval',
        '500ms',
        '--storage.retired_segment_grace',
        '2s',
        '--log-level',
        'info',
      ],
    });
    t.teardown(() => service.close());
    const tenant = await service.tenant('crash-ingest');
    t.equal((await tenant.request('POST', '/buckets', { json: { name: BUCKET } })).status, 201);
    const keys = Array.from({ length: 48 }, (_, index) => `obj/${String(index).padStart(3, '0')}`);
    const ledger = new Ledger();
    const bodies = new Bodies(
      { empty: 1, small: 6, medium: 5, 'large-random': 2, 'large-compressible': 2, shared: 3 },
      { mediumBytes: 100 * KiB, largeMin: 2 * MiB, largeMax: 5 * MiB },
    );
    const totals = {
      killedAtMs: [] as number[],
      tornSegments: 0,
      tornBytes: 0,
      deadOpenSegments: 0,
      verifiedKeys: 0,
      verifiedBytes: 0,
    };

    for (let round = 1; round <= ROUNDS; round += 1) {
      const client = new HttpClient(service.publicUrl, tenant.token);
      const ingest = startIngest({
        client: () => client,
        bucket: BUCKET,
        keys,
        lanes: LANES,
        bodies,
        ledger,
        deleteShare: 0.15,
      });
      const killAfter = 700 + crashRandom.int(2800);
      const enough = ledger.stats.puts + PUTS_PER_ROUND;
      await Promise.all([
        sleep(killAfter),
        untilDeadline(
          ledger.untilPuts(enough),
          () =>
            `round ${round}: ${PUTS_PER_ROUND} acknowledged PUTs before the kill (${ledger.stats.puts - enough + PUTS_PER_ROUND} came; statuses ${JSON.stringify(ledger.stats.statuses)})`,
        ),
      ]);
      // kill9 stops and kills the whole tree before it returns its promise; the lanes stop after.
      const killed = service.kill9();
      const stopped = ingest.stop();
      await killed;
      client.destroy();
      await stopped;
      totals.killedAtMs.push(killAfter);

      // What the crash left: open segments whose writers are dead, some with torn tails.
      const tails = await tornTails(service.dataDir);
      const torn = tails.filter((tail) => tail.validEnd < tail.fileSize);
      totals.deadOpenSegments += tails.length;
      totals.tornSegments += torn.length;
      totals.tornBytes += torn.reduce((sum, tail) => sum + tail.fileSize - tail.validEnd, 0);

      const restartAt = Date.now();
      await service.launch();
      const verifyAt = Date.now();
      const reader = new HttpClient(service.publicUrl, tenant.token);
      const verified = await verifyAll(reader, BUCKET, ledger, bodies);
      reader.destroy();
      t.same(
        verified.failures,
        [],
        `round ${round}: every key holds an allowed state (${verified.keys} keys, ${verified.present} present, ${(verified.bytes / MiB).toFixed(1)} MiB)`,
      );
      t.comment(
        `round ${round}: restart ${verifyAt - restartAt} ms, verify ${Date.now() - verifyAt} ms`,
      );
      totals.verifiedKeys += verified.keys;
      totals.verifiedBytes += verified.bytes;

      await sleep(1200); // at least one compaction pass (with its recovery step)
      const states = await segmentStates(service.dataDir);
      const deadOpen = states.filter((segment) => segment.state === 'open' && !segment.ownerAlive);
      t.same(
        deadOpen.map((segment) => segment.id),
        [],
        `round ${round}: no open segment of a dead writer remains`,
      );
      for (const tail of tails) {
        const now = states.find((segment) => segment.id === tail.id);
        if (!now || now.state === 'retired') continue; // compacted away meanwhile
        // Recovery cuts the torn tail and ends the segment with a seal footer (one sealed
        // shape); without room for the footer it seals at the cut (docs/on-disk-format.md §4).
        const sealedEnds = [tail.validEnd + SEAL_RECORD_SIZE, tail.validEnd];
        if (now.size === undefined || !sealedEnds.includes(now.size) || now.fileSize !== now.size) {
          t.fail(
            `round ${round}: segment ${tail.id} was ${String(tail.fileSize)} bytes, intact to ${String(tail.validEnd)}; now sealed at ${String(now.size)}, file ${String(now.fileSize)}`,
          );
        }
      }
      let sealedChecked = 0;
      for (const segment of states.filter((entry) => entry.state === 'sealed')) {
        const scan = await scanSegment(
          join(service.dataDir, 'segments', segmentFileName(segment.id)),
          () => undefined,
          { withBytes: false },
        ).catch(() => undefined);
        if (!scan || scan.torn || scan.fileSize !== segment.size)
          t.fail(
            `round ${round}: sealed segment ${segment.id} (size ${String(segment.size)}) scans ${scan ? `to ${String(scan.validEnd)} of ${scan.fileSize}` : 'not at all'}`,
          );
        sealedChecked += 1;
      }
      t.pass(
        `round ${round}: ${tails.length} open segments of dead writers (${torn.length} torn) recovered; ${sealedChecked} sealed segments scan clean`,
      );
      const files = await segmentFiles(service.dataDir);
      t.same(files.unknown, [], `round ${round}: every segment file is known to the index`);
      t.same(files.orphans, [], `round ${round}: nothing quarantined`);
      if (files.orphans.length > 0)
        t.comment(
          service.output
            .split('\n')
            .filter((line) => /recover|quarantin|compaction|retired/.test(line))
            .join('\n'),
        );
      const invariants = await indexInvariants(service.dataDir);
      t.same(
        invariants.violations,
        [],
        `round ${round}: reference counts and live bytes are exact (${invariants.liveChunks} live of ${invariants.chunks} chunks)`,
      );
      ledger.nextLifetime();
    }
    const { stats } = ledger;
    t.comment(`rounds ${ROUNDS}, killed after ${totals.killedAtMs.join('/')} ms of ingest`);
    t.comment(
      `acknowledged: ${stats.puts} PUTs (${(stats.putBytes / MiB).toFixed(1)} MiB), ${stats.deletes} DELETEs; refused ${stats.refused}; unknown ${stats.unknown} (found applied ${ledger.unknownApplied}, not applied ${ledger.unknownNotApplied}); statuses ${JSON.stringify(stats.statuses)}`,
    );
    t.comment(
      `dead writers' open segments at kill: ${totals.deadOpenSegments}, torn: ${totals.tornSegments} (${totals.tornBytes} bytes cut); verified ${totals.verifiedKeys} key reads, ${(totals.verifiedBytes / MiB).toFixed(1)} MiB`,
    );
    t.ok(stats.puts >= ROUNDS * PUTS_PER_ROUND, 'the rounds acknowledged a real amount of writes');
    t.ok(stats.unknown > 0, 'and the kills landed in the middle of requests');
  },
);
