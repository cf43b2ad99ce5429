// Goal: IndexStore.capture, with which a cluster member learns what a command would change
// before it publishes the change (docs/cluster.md §6): it answers the callback's result with every
// record read and written, in order, and leaves the index as it was; a callback that throws
// rejects with its error and leaves nothing either; captures see committed records.
// Method: a store on a temporary directory; a record committed, then captures over it.
import t from 'tap';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB } from '../../src/engine/index/schema.js';
import { tempDir } from './segment-testing.js';

t.test('capture records reads and writes and rolls them back', async (t) => {
  const store = IndexStore.open({ path: tempDir(t, 'lw-capture-'), readOnly: false });
  t.teardown(() => store.close());
  const a = Buffer.from('a');
  const b = Buffer.from('b');
  await store.transact(() => store.put(DB.tenants, a, { id: 'a', state: 'active' }));

  const captured = await store.capture(() => {
    const before = store.get<{ id: string }>(DB.tenants, a);
    store.has(DB.bucketNames, b);
    store.put(DB.tenants, b, { id: 'b', state: 'active' });
    store.remove(DB.tenants, a);
    return before?.id;
  });
  t.equal(captured.result, 'a', 'the callback saw the committed record');
  t.same(
    captured.accesses.map((access) => [access.db, access.key.toString(), access.write]),
    [
      [DB.tenants, 'a', false],
      [DB.bucketNames, 'b', false],
      [DB.tenants, 'b', true],
      [DB.tenants, 'a', true],
    ],
  );
  t.same(captured.accesses[2]?.value, { id: 'b', state: 'active' });
  t.equal(captured.accesses[3]?.value, undefined, 'a removal has no value');
  t.same(store.get(DB.tenants, a), { id: 'a', state: 'active' }, 'the removal was rolled back');
  t.equal(store.get(DB.tenants, b), undefined, 'the put was rolled back');

  await t.rejects(
    store.capture(() => {
      store.put(DB.tenants, b, { id: 'b' });
      throw new RangeError('rule broken');
    }),
    /rule broken/,
  );
  t.equal(store.get(DB.tenants, b), undefined, 'a throwing capture leaves nothing');
  await store.transact(() => store.put(DB.tenants, b, { id: 'b2' }));
  t.same(store.get(DB.tenants, b), { id: 'b2' }, 'commits go on after captures');
});
