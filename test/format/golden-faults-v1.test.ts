// Goal: current code reads a `segments` row marked by a failed fdatasync as it was first written
// (test/golden/faults-v1/, written once by test/golden/make-faults-v1.ts), still writes the same
// bytes, and a restarted engine refuses the segment it names.
// Method: compare the committed files with what today's key builder and value codec make of
// the same fields; put the committed row into a fresh index and ask the engine's
// `watchedSegments`, which is what an engine's syncer loads at start.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { decodeValue, encodeValue } from '../../src/format/values.js';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, type SegmentRecord } from '../../src/engine/index/schema.js';
import { watchedSegments } from '../../src/engine/ops/segments.js';
import { loadSettings } from '../../src/util/config.js';
import { repoRoot } from '../golden/golden-dir.js';
import { faultsGoldenRows } from '../golden/make-faults-v1.js';
import { tempDir } from '../engine/segment-testing.js';

const directory = join(repoRoot(), 'test', 'golden', 'faults-v1');

function golden(name: string): Buffer {
  return readFileSync(join(directory, name));
}

t.test('the row: the same key bytes, the same value bytes, the same fields', async (t) => {
  for (const row of faultsGoldenRows()) {
    t.ok(golden(`${row.name}.key`).equals(row.key), `${row.name}: key bytes`);
    const value = golden(`${row.name}.value`);
    t.ok(value.equals(encodeValue(1, row.value)), `${row.name}: value bytes`);
    const decoded = decodeValue(value);
    t.equal(decoded.schemaVersion, 1);
    t.same(decoded.value, row.value, `${row.name}: fields`);
  }
  t.equal(golden('segment-sync-failed.key').toString('hex'), '000000000000002b');
});

t.test('a restarted engine refuses the segment the row names', async (t) => {
  const store = IndexStore.open({ path: tempDir(t, 'lw-golden-faults-'), readOnly: false });
  t.teardown(() => store.close());
  const row = decodeValue(golden('segment-sync-failed.value')).value as unknown as SegmentRecord;
  await store.transact(() => store.put(DB.segments, golden('segment-sync-failed.key'), row));
  const context = {
    store,
    masterKey: Buffer.alloc(32),
    settings: loadSettings({ flags: {} }),
    now: () => 0,
  };
  t.same(watchedSegments(context), { failed: [43], writing: [] }, 'segment 43 is refused');
});
