// Goal: index values are decoded, then migrated: a value keeps the schema version it was
// written with, a version newer than this release reads is refused with `format_too_new`
// (never read as an older one), and an older one runs through its family's chain, one step per
// version. The store applies this to every read path (get, getShared, range, batch records).
// Method: values encoded by the format codec at chosen versions, written raw into a real LMDB
// index, read back through IndexStore; the chain itself with a chain and version given.
import t from 'tap';
import { encodeValue } from '../../src/format/values.js';
import { decodeRecord, CURRENT_VERSIONS, MIGRATIONS } from '../../src/engine/index/migrate.js';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, segmentKey } from '../../src/engine/index/schema.js';
import { errorCode } from '../../src/util/errors.js';
import { tempDir } from './segment-testing.js';

t.test('every family has a chain that reaches its current version', (t) => {
  for (const db of Object.values(DB)) t.equal(MIGRATIONS[db].length, CURRENT_VERSIONS[db] - 1);
  t.end();
});

t.test('a newer schema version is refused, never read as the current one', (t) => {
  const raw = encodeValue(CURRENT_VERSIONS.segments + 1, { id: 1, state: 'sealed' });
  let caught: unknown;
  try {
    decodeRecord(DB.segments, raw);
  } catch (error) {
    caught = error;
  }
  t.equal(errorCode(caught), 'format_too_new');
  t.end();
});

t.test('an older version runs through each step of its chain, in order', (t) => {
  const chain = [
    (value: Record<string, unknown>) => ({ ...value, two: true }),
    (value: Record<string, unknown>) => ({ ...value, three: value['two'] === true }),
  ];
  const v1 = encodeValue(1, { id: 7 });
  t.same(decodeRecord(DB.segments, v1, 3, chain), { id: 7, two: true, three: true });
  const v2 = encodeValue(2, { id: 7, two: true });
  t.same(decodeRecord(DB.segments, v2, 3, chain), { id: 7, two: true, three: true });
  t.same(decodeRecord(DB.segments, encodeValue(3, { id: 7 }), 3, chain), { id: 7 });
  t.end();
});

t.test('IndexStore refuses a value written by a newer release on every read path', async (t) => {
  const store = IndexStore.open({ path: tempDir(t, 'lw-migrate-'), readOnly: false });
  t.teardown(() => store.close());
  const key = segmentKey(1);
  const newer = encodeValue(CURRENT_VERSIONS.segments + 1, { id: 1, state: 'sealed' });
  await store.transact(() => store.put(DB.segments, key, { id: 1, state: 'open' }));
  // The raw bytes, as a newer release would have written them.
  const raw = store as unknown as { db(name: string): { putSync(k: Buffer, v: Buffer): void } };
  await store.transact(() => raw.db(DB.segments).putSync(key, newer));
  const code = (read: () => unknown): string | undefined => {
    try {
      read();
    } catch (error) {
      return errorCode(error);
    }
    return undefined;
  };
  t.equal(
    code(() => store.get(DB.segments, key)),
    'format_too_new',
    'get',
  );
  t.equal(
    code(() => store.getShared(DB.segments, key)),
    'format_too_new',
    'getShared',
  );
  t.equal(
    code(() => [...store.range(DB.segments, {})]),
    'format_too_new',
    'range',
  );
});
