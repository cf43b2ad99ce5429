// Goal: the read cache of IndexStore.getShared, used for the records read on every request.
// It must hand out the stored value, frozen; a record changed by another process (a new
// commit) is decoded again; a removed record reads as absent; equal records under different
// keys or databases stay apart.
// Method: a writer store and a read-only store on one temporary directory, as the engine and a
// gateway have them.
import t from 'tap';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB } from '../../src/engine/index/schema.js';
import { tempDir } from './segment-testing.js';

t.test('getShared follows commits and hands out frozen values', async (t) => {
  const dir = tempDir(t, 'lw-index-');
  const writer = IndexStore.open({ path: dir, readOnly: false });
  const reader = IndexStore.open({ path: dir, readOnly: true });
  t.teardown(async () => {
    await reader.close();
    await writer.close();
  });
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
