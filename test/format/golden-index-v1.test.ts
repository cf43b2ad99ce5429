// Goal: current code reads the golden LMDB index (test/golden/index-v1/data.mdb, written once by
// test/golden/make-index-v1.ts) record for record, still writes the same bytes for the same
// records, and docs/on-disk-format.md §5.1 lists exactly those bytes.
// Method: open a copy of the committed environment with `IndexStore` and compare every entry
// of every database (raw key and value bytes, through `scanRaw`) with today's key builders and
// value codec, and every decoded record with its fields; write the same rows into a fresh
// environment and compare its entries with the golden's; parse the hex block of §5.1 and
// compare it with the golden's entries; read the golden chunk row's record from the v1 segment
// golden, which it names.

import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, type ChunkRecord } from '../../src/engine/index/schema.js';
import { decodeValue, encodeValue } from '../../src/format/values.js';
import { decodeRecordHeader, verifyPayload } from '../../src/format/record-frame.js';
import { goldenDir, repoRoot } from '../golden/golden-dir.js';
import { indexGoldenRows, renderIndexGolden } from '../golden/make-index-v1.js';

interface RawRow {
  name: string;
  db: string;
  key: Buffer;
  value: Buffer;
}

const scratch = mkdtempSync(join(tmpdir(), 'lw-golden-index-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

/** A copy of the golden environment, opened read-only (the committed file is never opened). */
function openGolden(): IndexStore {
  const directory = join(scratch, 'golden');
  mkdirSync(directory);
  copyFileSync(
    join(repoRoot(), 'test', 'golden', 'index-v1', 'data.mdb'),
    join(directory, 'data.mdb'),
  );
  return IndexStore.open({ path: directory, readOnly: true });
}

/** Every entry of every database, in database then key order, with the row name it has. */
function entries(store: IndexStore): RawRow[] {
  const names = new Map(
    indexGoldenRows().map((row) => [`${row.db}/${row.key.toString('hex')}`, row.name]),
  );
  const rows: RawRow[] = [];
  for (const db of Object.values(DB)) {
    store.scanRaw(db, {}, (entry) => {
      const key = Buffer.from(entry.keyBytes.subarray(entry.keyStart, entry.keyEnd));
      const value = Buffer.from(entry.valueBytes.subarray(0, entry.valueLength));
      rows.push({ name: names.get(`${db}/${key.toString('hex')}`) ?? '?', db, key, value });
      return true;
    });
  }
  return rows;
}

/** The rows as today's code encodes them, in database then key order. */
function expected(): RawRow[] {
  const order = Object.values(DB) as string[];
  return indexGoldenRows()
    .map((row) => ({ name: row.name, db: row.db, key: row.key, value: encodeValue(1, row.value) }))
    .sort((a, b) => order.indexOf(a.db) - order.indexOf(b.db) || Buffer.compare(a.key, b.key));
}

const hexRows = (rows: RawRow[]): string[] =>
  rows.map(
    (row) => `${row.db} ${row.name} ${row.key.toString('hex')} ${row.value.toString('hex')}`,
  );

const golden = openGolden();
t.teardown(() => golden.close());
const goldenRows = entries(golden);

t.test('the golden holds exactly the rows, in the bytes today writes', async (t) => {
  t.equal(goldenRows.length, indexGoldenRows().length, 'one entry per row, nothing else');
  t.same(hexRows(goldenRows), hexRows(expected()), 'keys and values, byte for byte');
});

t.test('every golden record decodes to its fields', async (t) => {
  for (const row of indexGoldenRows()) {
    t.same(golden.get(row.db, row.key), row.value, `${row.name}: read through IndexStore`);
    const raw = goldenRows.find((entry) => entry.db === row.db && entry.key.equals(row.key));
    t.equal(raw && decodeValue(raw.value).schemaVersion, 1, `${row.name}: schema version 1`);
  }
});

t.test('today written, the same rows give the same entries', async (t) => {
  const store = IndexStore.open({ path: join(scratch, 'fresh'), readOnly: false });
  t.teardown(() => store.close());
  await store.transact(() => {
    for (const row of indexGoldenRows()) store.put(row.db, row.key, row.value);
  });
  t.same(hexRows(entries(store)), hexRows(goldenRows));
});

t.test('docs/on-disk-format.md §5.1 lists the golden bytes', async (t) => {
  const document = readFileSync(join(repoRoot(), 'docs', 'on-disk-format.md'), 'utf8');
  const block = /<!-- golden: index-v1 -->\n```\n([\s\S]*?)\n```/.exec(document)?.[1];
  t.ok(block, 'the document has the block');
  t.equal(block, renderIndexGolden(goldenRows), 'the block is the golden, row for row');
});

t.test('the golden chunk row names chunk A of the v1 segment golden', async (t) => {
  const row = indexGoldenRows().find((entry) => entry.name === 'chunk');
  const chunk = row && golden.get<ChunkRecord>(DB.chunks, row.key);
  if (!row || !chunk) {
    t.fail('no chunk row');
    return;
  }
  t.equal(chunk.segmentId, 42, 'segment 42, the id in the segment golden');
  const segment = readFileSync(join(goldenDir(1), 'segment.seg'));
  const record = segment.subarray(chunk.offset, chunk.offset + chunk.length);
  const header = decodeRecordHeader(record, 0);
  t.ok(header.chunkId.equals(row.key.subarray(4)), 'the chunk id of its key');
  t.equal(header.tenantNum, row.key.readUInt32BE(0), 'the tenant number of its key');
  t.equal(header.payloadChecksum, chunk.payloadChecksum, 'the payload checksum');
  t.equal(header.plainLength, chunk.plainLength, 'the plain length');
  t.equal(header.recordLength, chunk.length, 'the record length');
  verifyPayload(header, record.subarray(80));
});
