// Goal: the engine's group commit of commands (CommandBatch). Commands submitted while no batch
// has started share one child transaction and each settles on its own: a command that throws
// before writing fails alone and the others commit; a command that throws after writing leaves
// nothing behind, while every other command of its batch still commits (each re-run in its own
// transaction); a command submitted while a batch commits runs after it.
// Method: a real IndexStore in a temporary directory; commands write to the meta database and
// the test reads back what committed, including from a second, read-only store.
import t from 'tap';
import { IndexStore, CommandBatch } from '../../src/engine/index/store.js';
import { DB } from '../../src/engine/index/schema.js';
import { Conflict, errorCode } from '../../src/util/errors.js';
import { tempDir, type TapLike } from './segment-testing.js';

function openStore(t: TapLike): { store: IndexStore; dir: string } {
  const dir = tempDir(t, 'lw-batch-');
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(() => store.close());
  return { store, dir };
}

const key = (name: string): Buffer => Buffer.from(`test:${name}`);

function writeThen(store: IndexStore, name: string, fail?: string): () => string {
  return () => {
    store.put(DB.meta, key(name), { name });
    if (fail) throw Conflict(fail);
    return name;
  };
}

function failFirst(message: string): () => never {
  return () => {
    throw Conflict(message);
  };
}

t.test('a command that fails before writing fails alone; the others commit', async (t) => {
  const { store } = openStore(t);
  const batch = new CommandBatch(store);
  const results = await Promise.allSettled([
    batch.submit(writeThen(store, 'a')),
    batch.submit(failFirst('refused')),
    batch.submit(writeThen(store, 'c')),
  ]);
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  t.equal((results[0] as PromiseFulfilledResult<string>).value, 'a');
  t.equal(errorCode((results[1] as PromiseRejectedResult).reason), 'conflict');
  t.same(store.get(DB.meta, key('a')), { name: 'a' });
  t.same(store.get(DB.meta, key('c')), { name: 'c' });
});

t.test(
  'a command that fails after writing leaves nothing; the rest of its batch commits',
  async (t) => {
    const { store } = openStore(t);
    const batch = new CommandBatch(store);
    let runsOfA = 0;
    const results = await Promise.allSettled([
      batch.submit(() => {
        runsOfA += 1;
        return writeThen(store, 'a')();
      }),
      batch.submit(writeThen(store, 'torn', 'failed half-way')),
      batch.submit(writeThen(store, 'c')),
    ]);
    t.same(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    t.equal(errorCode((results[1] as PromiseRejectedResult).reason), 'conflict');
    t.equal(store.get(DB.meta, key('torn')), undefined, 'the failed command wrote nothing');
    t.same(store.get(DB.meta, key('a')), { name: 'a' });
    t.same(store.get(DB.meta, key('c')), { name: 'c' });
    t.equal(runsOfA, 2, 'the batch was rolled back and its commands ran again one by one');
  },
);

t.test('a command submitted while a batch commits runs after that batch', async (t) => {
  const { store } = openStore(t);
  const batch = new CommandBatch(store);
  const order: string[] = [];
  let late: Promise<string> | undefined;
  const first = batch.submit(() => {
    order.push('first');
    // Runs once the batch's callbacks are done and its commit is being written.
    queueMicrotask(() => {
      late = batch.submit(() => {
        order.push('late');
        return 'late';
      });
    });
    return 'first';
  });
  const second = batch.submit(() => {
    order.push('second');
    return 'second';
  });
  t.same(await Promise.all([first, second]), ['first', 'second']);
  t.equal(await late, 'late');
  t.same(order, ['first', 'second', 'late']);
});

t.test('a resolved command is durable and visible to a read-only store', async (t) => {
  const { store, dir } = openStore(t);
  const batch = new CommandBatch(store);
  await Promise.all(
    Array.from({ length: 50 }, (_, index) => batch.submit(writeThen(store, `k${index}`))),
  );
  const reader = IndexStore.open({ path: dir, readOnly: true });
  t.teardown(() => reader.close());
  for (let index = 0; index < 50; index += 1)
    t.same(reader.get(DB.meta, key(`k${index}`)), { name: `k${index}` });
});

// The records of the counters, usage and segments databases are kept decoded within a batch and
// written once at its end (IndexStore's header): each command must still see what the previous
// one left, a failed command must leave no trace even when it changed a record only in place,
// and scans and other processes must see what the batch committed.

function increment(store: IndexStore, name: string, fail?: string): () => number {
  return () => {
    const counter = store.get<{ count: number }>(DB.meta, key(name)) ?? { count: 0 };
    counter.count += 1;
    if (fail) throw Conflict(fail); // changed in place, never put
    store.put(DB.meta, key(name), counter);
    return counter.count;
  };
}

t.test('commands of one batch see each other in a record the batch holds', async (t) => {
  const { store, dir } = openStore(t);
  const batch = new CommandBatch(store);
  const counts = await Promise.all(
    Array.from({ length: 20 }, () => batch.submit(increment(store, 'counter'))),
  );
  t.same(
    counts,
    Array.from({ length: 20 }, (_, index) => index + 1),
    'each command saw the one before it',
  );
  const reader = IndexStore.open({ path: dir, readOnly: true });
  t.teardown(() => reader.close());
  t.same(reader.get(DB.meta, key('counter')), { count: 20 }, 'committed once, for all');
});

t.test('a command that changed a held record in place and failed leaves no trace', async (t) => {
  const { store } = openStore(t);
  const batch = new CommandBatch(store);
  const results = await Promise.allSettled([
    batch.submit(increment(store, 'counter')),
    batch.submit(increment(store, 'counter', 'failed after changing it')),
    batch.submit(increment(store, 'counter')),
  ]);
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  t.same(store.get(DB.meta, key('counter')), { count: 2 }, 'only the two that succeeded count');
});

t.test('a scan within a batch sees the records the batch holds; removes commit', async (t) => {
  const { store, dir } = openStore(t);
  const batch = new CommandBatch(store);
  await batch.submit(writeThen(store, 'doomed'));
  const seen = await Promise.all([
    batch.submit(increment(store, 'counter')),
    batch.submit(() => {
      store.remove(DB.meta, key('doomed'));
      return store.has(DB.meta, key('doomed'));
    }),
    batch.submit(() =>
      [...store.range<{ count?: number }>(DB.meta, { start: key(''), end: key('~') })].map(
        (entry) => [entry.key.toString(), entry.value.count],
      ),
    ),
  ]);
  t.equal(seen[1], false, 'a removed record is gone at once');
  t.same(seen[2], [['test:counter', 1]], 'the scan saw the change and the remove of the batch');
  const reader = IndexStore.open({ path: dir, readOnly: true });
  t.teardown(() => reader.close());
  t.equal(reader.get(DB.meta, key('doomed')), undefined, 'the remove committed');
  t.same(reader.get(DB.meta, key('counter')), { count: 1 });
});

t.test(
  'a command that only peeks at a held record and fails does not roll back its batch',
  async (t) => {
    const { store } = openStore(t);
    const batch = new CommandBatch(store);
    await batch.submit(increment(store, 'counter'));
    let runsOfFirst = 0;
    const results = await Promise.allSettled([
      batch.submit(() => {
        runsOfFirst += 1;
        return increment(store, 'counter')();
      }),
      batch.submit(() => {
        const seen = store.peek<{ count: number }>(DB.meta, key('counter'));
        throw Conflict(`refused at count ${String(seen?.count)}`);
      }),
    ]);
    t.same(
      results.map((r) => r.status),
      ['fulfilled', 'rejected'],
    );
    t.match((results[1] as PromiseRejectedResult).reason, { message: 'refused at count 2' });
    t.equal(runsOfFirst, 1, 'the batch was not rolled back and run again');
    t.same(store.get(DB.meta, key('counter')), { count: 2 });
  },
);
