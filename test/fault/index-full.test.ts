// Goal: an LMDB commit that finds the disk full is `disk_full` (503 with Retry-After to
// clients), the process goes on (lmdb-js's own rejections of the failed batch end nobody), the
// index stays usable, and a command group whose commit failed is committed once more when the
// space reserve gave room back; the reserve itself is taken with allocated blocks, given back,
// and taken again only with room to spare.
// Method: the IndexStore, CommandBatch and SpaceReserve on an 8 MiB tmpfs (mounted here; the
// test skips, saying why, where it cannot mount one), filled by commits of incompressible
// values until one fails.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { IndexStore, CommandBatch } from '../../src/engine/index/store.js';
import { DB } from '../../src/engine/index/schema.js';
import { SpaceReserve } from '../../src/engine/space-reserve.js';
import { errorCode } from '../../src/util/errors.js';
import { toProblem } from '../../src/http/error-answer.js';

const MiB = 1024 * 1024;

function smallFilesystem(): { dir: string } | { skip: string } {
  const dir = mkdtempSync(join(tmpdir(), 'lw-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', dir], { stdio: 'pipe' });
    return { dir };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    return { skip: `cannot mount a small tmpfs to fill: ${String(error).split('\n')[0] ?? ''}` };
  }
}

const small = smallFilesystem();
if ('dir' in small)
  t.teardown(() => {
    execFileSync('umount', ['-l', small.dir]);
    rmSync(small.dir, { recursive: true, force: true });
  });
const skip = 'skip' in small ? small.skip : false;
const log = pino({ level: 'silent' });

/** Commits 64 KiB values until a commit fails; answers the keys committed and the failure. */
async function fill(
  store: IndexStore,
  prefix: string,
): Promise<{ keys: Buffer[]; error: unknown }> {
  const keys: Buffer[] = [];
  for (let i = 0; i < 1000; i += 1) {
    const key = Buffer.from(`${prefix}-${String(i).padStart(4, '0')}`);
    try {
      await store.transact(() => store.put(DB.meta, key, { filler: randomBytes(64 * 1024) }));
    } catch (error) {
      return { keys, error };
    }
    keys.push(key);
  }
  throw new Error('1000 commits of 64 KiB never filled an 8 MiB disk');
}

t.test('a full disk fails the commit, not the engine', { skip }, async (t) => {
  if (!('dir' in small)) return;
  const root = join(small.dir, 'one');
  mkdirSync(join(root, 'index'), { recursive: true });
  const reserve = new SpaceReserve({ root, configuredBytes: 192 * MiB, log });
  await reserve.open();
  t.ok(reserve.whole, 'the reserve is taken at start');
  t.equal(statSync(reserve.path).size, MiB, 'capped at an eighth of the file system');
  t.ok(statSync(reserve.path).blocks * 512 >= MiB, 'with allocated blocks, not a hole');

  const store = IndexStore.open({ path: join(root, 'index'), readOnly: false });
  t.teardown(() => store.close());
  // Other files on the disk, removed at the end to give room back.
  const ballast = join(small.dir, 'ballast');
  writeFileSync(ballast, randomBytes(2 * MiB));
  const { keys, error } = await fill(store, 'a');
  t.ok(keys.length > 0, `${keys.length} commits before the disk was full`);
  t.equal(errorCode(error), 'disk_full', 'the failed commit is disk_full');
  const problem = toProblem(error);
  t.equal(problem.status, 503, 'which clients get as 503');

  // The process is still here (an unhandled rejection would have failed this test), and the
  // index still works: a small commit, and deletes, which give LMDB pages back.
  for (const key of keys.slice(0, 20)) await store.transact(() => store.remove(DB.meta, key));
  t.pass('deletes commit after the failure');
  t.equal(store.get(DB.meta, keys[0] as Buffer), undefined, 'and are seen');
  t.ok(store.get(DB.meta, keys[30] as Buffer), 'what was committed before reads back');

  // A group whose commit found the disk full runs again once the reserve made room.
  let made = 0;
  const batch = new CommandBatch(store, undefined, async () => {
    made += 1;
    return (await reserve.release('test')) > 0;
  });
  const more = await fill(store, 'b');
  t.equal(errorCode(more.error), 'disk_full', 'the disk is full again');
  const value = await batch.submit(() => {
    store.put(DB.meta, Buffer.from('after-full'), { filler: randomBytes(256 * 1024) });
    return 'committed';
  });
  t.equal(value, 'committed', 'the group committed after the reserve was given back');
  t.equal(made, 1, 'room was made once');
  t.notOk(reserve.whole, 'the reserve is out');
  t.equal(await reserve.restore(), false, 'and is not taken back while there is no room');
  // LMDB keeps its file's size (freed pages stay inside it): room comes from other files.
  rmSync(ballast);
  t.equal(await reserve.restore(), true, 'taken back once there is room');
});
