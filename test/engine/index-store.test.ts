// Goal: the read cache of IndexStore.getShared, used for the records read on every request,
// and scanRaw, the copy-free range scan of listings.
// It must hand out the stored value, frozen; a record changed by another process (a new
// commit) is decoded again; a removed record reads as absent; equal records under different
// keys or databases stay apart. An empty key (a client can send one, say an empty access key
// id) is simply absent, for get, getShared and has alike, where LMDB itself throws; so is a key
// longer than LMDB stores (an id of any length can arrive in a request path).
// Method: a writer store and a read-only store on one temporary directory, as the engine and a
// gateway have them.
import t from 'tap';
import { IndexStore, INDEX_KEY_BYTES_MAX } from '../../src/engine/index/store.js';
import { DB } from '../../src/engine/index/schema.js';
import { decodeValue } from '../../src/format/values.js';
import { tempDir, type TapLike } from './segment-testing.js';

/** A writer and a read-only store on one temporary directory, closed at the end of `t`. */
function openPair(t: TapLike): { writer: IndexStore; reader: IndexStore } {
  const dir = tempDir(t, 'lw-index-');
  const writer = IndexStore.open({ path: dir, readOnly: false });
  const reader = IndexStore.open({ path: dir, readOnly: true });
  t.teardown(async () => {
    await reader.close();
    await writer.close();
  });
  return { writer, reader };
}

t.test('getShared follows commits and hands out frozen values', async (t) => {
  const { writer, reader } = openPair(t);
  const key = Buffer.from('tenant-a');
  await writer.transact(() =>
    writer.put(DB.tenants, key, { id: 'a', state: 'active', tags: ['x'] }),
  );
  reader.refresh();
  const first = reader.getShared<{ id: string; state: string; tags: string[] }>(DB.tenants, key);
  t.same(first, { id: 'a', state: 'active', tags: ['x'] });
  t.ok(Object.isFrozen(first) && Object.isFrozen(first?.tags), 'frozen, nested values too');
  t.throws(
    () => {
      (first as { state: string }).state = 'changed';
    },
    TypeError,
    'a caller cannot modify the shared value',
  );
  t.equal(reader.getShared(DB.tenants, key), first, 'unchanged bytes: the same decoded value');
  t.equal(
    reader.getShared(DB.buckets, key),
    undefined,
    'another database, same key: its own answer',
  );

  await writer.transact(() =>
    writer.put(DB.tenants, key, { id: 'a', state: 'disabled', tags: ['x'] }),
  );
  reader.refresh();
  t.same(
    reader.getShared(DB.tenants, key),
    { id: 'a', state: 'disabled', tags: ['x'] },
    'a new commit is seen',
  );

  await writer.transact(() => writer.remove(DB.tenants, key));
  reader.refresh();
  t.equal(reader.getShared(DB.tenants, key), undefined, 'a removed record is gone');
});

t.test('getShared by a caller-given id follows commits the same way', async (t) => {
  const { writer, reader } = openPair(t);
  const key = Buffer.from('AKID1');
  await writer.transact(() => {
    writer.put(DB.accessKeys, key, { state: 'active' });
    writer.put(DB.tenants, key, { state: 'tenant' });
  });
  reader.refresh();
  const byId = reader.getShared<{ state: string }>(DB.accessKeys, key, 'AKID1');
  t.same(byId, { state: 'active' });
  t.equal(reader.getShared(DB.accessKeys, key, 'AKID1'), byId, 'unchanged: the same value');
  t.same(reader.getShared(DB.tenants, key, 'AKID1'), { state: 'tenant' }, 'ids are per database');
  await writer.transact(() => writer.put(DB.accessKeys, key, { state: 'revoked' }));
  reader.refresh();
  t.same(reader.getShared(DB.accessKeys, key, 'AKID1'), { state: 'revoked' }, 'a commit is seen');
  await writer.transact(() => writer.remove(DB.accessKeys, key));
  reader.refresh();
  t.equal(reader.getShared(DB.accessKeys, key, 'AKID1'), undefined, 'a removal too');
});

t.test('getSharedById makes a key once per id and follows commits', async (t) => {
  const { writer, reader } = openPair(t);
  await writer.transact(() => {
    writer.put(DB.tenants, Buffer.from('t1'), { state: 'active' });
    writer.put(DB.tenants, Buffer.from('t2'), { state: 'other' });
  });
  reader.refresh();
  const made: string[] = [];
  const keyOf = (id: string): Buffer => {
    made.push(id);
    return Buffer.from(id);
  };
  const first = reader.getSharedById<{ state: string }>(DB.tenants, 't1', keyOf);
  t.same(first, { state: 'active' });
  t.equal(reader.getSharedById(DB.tenants, 't1', keyOf), first, 'unchanged: the same value');
  t.same(reader.getSharedById(DB.tenants, 't2', keyOf), { state: 'other' }, 'ids apart');
  t.same(made, ['t1', 't2'], 'a key made once per id');
  await writer.transact(() => writer.put(DB.tenants, Buffer.from('t1'), { state: 'disabled' }));
  reader.refresh();
  t.same(reader.getSharedById(DB.tenants, 't1', keyOf), { state: 'disabled' }, 'a commit is seen');
  await writer.transact(() => writer.remove(DB.tenants, Buffer.from('t1')));
  reader.refresh();
  t.equal(reader.getSharedById(DB.tenants, 't1', keyOf), undefined, 'a removal too');
  await writer.transact(() => writer.put(DB.tenants, Buffer.from('t1'), { state: 'again' }));
  reader.refresh();
  t.same(reader.getSharedById(DB.tenants, 't1', keyOf), { state: 'again' }, 'and a new record');
});

t.test('get decodes a fresh value that shares no bytes with the next read', async (t) => {
  const { writer, reader } = openPair(t);
  await writer.transact(() => {
    writer.put(DB.tenants, Buffer.from('a'), { id: 'a', wrappedKey: Buffer.alloc(32, 1) });
    writer.put(DB.tenants, Buffer.from('b'), { id: 'b', wrappedKey: Buffer.alloc(32, 2) });
  });
  reader.refresh();
  const a = reader.get<{ id: string; wrappedKey: Buffer }>(DB.tenants, Buffer.from('a'));
  const b = reader.get<{ id: string; wrappedKey: Buffer }>(DB.tenants, Buffer.from('b'));
  t.same(a?.wrappedKey, Buffer.alloc(32, 1), 'the first value is intact after another read');
  t.same(b?.wrappedKey, Buffer.alloc(32, 2));
  a?.wrappedKey.fill(9);
  t.same(
    reader.get<{ wrappedKey: Buffer }>(DB.tenants, Buffer.from('a'))?.wrappedKey,
    Buffer.alloc(32, 1),
    'changing a value changes nothing stored or shared',
  );
});

t.test('an empty key finds nothing instead of throwing', async (t) => {
  const { writer, reader } = openPair(t);
  await writer.transact(() => writer.put(DB.accessKeys, Buffer.from('k'), { id: 'k' }));
  reader.refresh();
  for (const store of [writer, reader]) {
    t.equal(store.get(DB.accessKeys, Buffer.alloc(0)), undefined, 'get');
    t.equal(store.getShared(DB.accessKeys, Buffer.alloc(0)), undefined, 'getShared');
    t.equal(store.has(DB.accessKeys, Buffer.alloc(0)), false, 'has');
  }
  t.same(reader.get(DB.accessKeys, Buffer.from('k')), { id: 'k' }, 'a real key still reads');
});

t.test('a key longer than LMDB stores finds nothing instead of throwing', async (t) => {
  const { writer, reader } = openPair(t);
  const longest = Buffer.alloc(INDEX_KEY_BYTES_MAX, 0x61);
  await writer.transact(() => writer.put(DB.tenants, longest, { id: 'longest' }));
  reader.refresh();
  for (const store of [writer, reader]) {
    for (const bytes of [INDEX_KEY_BYTES_MAX + 1, 4097, 100_000]) {
      const key = Buffer.alloc(bytes, 0x61);
      t.equal(store.get(DB.tenants, key), undefined, `get, ${bytes} bytes`);
      t.equal(store.peek(DB.tenants, key), undefined, `peek, ${bytes} bytes`);
      t.equal(store.getShared(DB.tenants, key), undefined, `getShared, ${bytes} bytes`);
      t.equal(store.has(DB.tenants, key), false, `has, ${bytes} bytes`);
    }
    t.same(store.get(DB.tenants, longest), { id: 'longest' }, 'the longest key still reads');
  }
});

t.test('scanRaw visits what range visits, in place', async (t) => {
  // Method: keys across the byte range (0x00 and 0xff first bytes included) in one database,
  // scanned with every bound option; each entry's bytes are copied during its visit and
  // compared with the copies `range` hands out.
  const { writer, reader } = openPair(t);
  const keys = [[0], [0, 0], [1, 2], [4, 255], [5], [5, 0], [97, 98], [255], [255, 255, 1]];
  await writer.transact(() => {
    // Values up to 300 KB: lmdb-js reads large values into a buffer of their own.
    keys.forEach((key, index) =>
      writer.put(DB.objects, Buffer.from(key), { index, padding: 'x'.repeat(index ** 6) }),
    );
    writer.put(DB.versions, Buffer.from([3]), { other: true });
  });
  reader.refresh();
  const cases = [
    {},
    { start: Buffer.from([1]) },
    { end: Buffer.from([97, 98]) },
    { start: Buffer.from([0, 0]), end: Buffer.from([255]) },
    { limit: 3 },
    { reverse: true },
    { reverse: true, start: Buffer.from([97]), end: Buffer.from([0, 0]) },
    { reverse: true, limit: 2 },
  ];
  for (const store of [reader, writer]) {
    for (const options of cases) {
      const expected = [...store.range<unknown>(DB.objects, options)].map((entry) => ({
        key: entry.key.toString('hex'),
        value: entry.value,
      }));
      const seen: Array<{ key: string; value: unknown }> = [];
      store.scanRaw(DB.objects, options, (entry) => {
        const key = entry.keyBytes.subarray(entry.keyStart, entry.keyEnd).toString('hex');
        const bytes = Buffer.from(entry.valueBytes.subarray(0, entry.valueLength));
        seen.push({ key, value: decodeValue(bytes).value });
        return true;
      });
      t.same(seen, expected, `${store.readOnly ? 'reader' : 'writer'} ${JSON.stringify(options)}`);
    }
  }
  let visits = 0;
  reader.scanRaw(DB.objects, {}, () => ++visits < 4);
  t.equal(visits, 4, 'a visit that answers false ends the scan');
});
