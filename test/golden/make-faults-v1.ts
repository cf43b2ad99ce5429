// Generator of the golden file of a `segments` row marked by a failed fdatasync (format version
// 1, schema version 1, the optional `syncFailedAt` field). It was run ONCE, when the field was
// added.
//
// NEVER RUN IT AGAIN. test/golden/faults-v1/ is data "written by" that release and is read
// forever by test/format/golden-faults-v1.test.ts. It refuses to overwrite files and writes
// only when given --write-once:
//
//   node dist/test/golden/make-faults-v1.js --write-once
//
// It writes one file per row: `<name>.key` and `<name>.value`, the exact bytes LMDB holds.
//
// When tap runs the compiled test tree it also runs this file, which then does nothing.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeValue } from '../../src/format/values.js';
import { segmentKey, type SegmentRecord } from '../../src/engine/index/schema.js';
import { repoRoot } from './golden-dir.js';

/** The rows, shared with the test: what each file holds, as the engine builds it. */
export function faultsGoldenRows(): Array<{ name: string; key: Buffer; value: SegmentRecord }> {
  return [
    {
      // Sealed by its writer after the seal's fdatasync failed (segment-syncer.ts).
      name: 'segment-sync-failed',
      key: segmentKey(43),
      value: {
        id: 43,
        state: 'sealed',
        createdAt: Date.UTC(2026, 0, 1, 0, 0, 0, 123),
        liveBytes: 105,
        syncFailedAt: Date.UTC(2026, 0, 1, 0, 0, 1),
        size: 64,
        sealedAt: Date.UTC(2026, 0, 1, 0, 0, 2),
      },
    },
  ];
}

function main(): void {
  if (!process.argv.includes('--write-once')) return;
  const directory = join(repoRoot(), 'test', 'golden', 'faults-v1');
  for (const row of faultsGoldenRows()) {
    writeFileSync(join(directory, `${row.name}.key`), row.key, { flag: 'wx' });
    writeFileSync(join(directory, `${row.name}.value`), encodeValue(1, row.value), { flag: 'wx' });
  }
}

main();
