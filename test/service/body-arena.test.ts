// Goal: the body arena's block accounting and the upload reserve. `tryTake` and `tryTakeMany`
// hand out free blocks but never jump ahead of a waiting admission; `takeMany` admits in arrival
// order once enough blocks are free, taking owners (tenants) in turn, and no later request passes
// the one whose turn it is; a reserve larger than the arena is refused. An upload's
// reserve covers a chunk of the largest size plus its pause slack and resume gap, and never
// more blocks than its body needs. `write` puts bytes at any offset, exactly.
// Method: a real BodyArena with small blocks; `reserveBlocks` with the gateway's 1 MiB blocks;
// `write` with a recording copy function and with the default one (`copyBytes`).
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { BodyArena } from '../../src/service/body-arena.js';
import { reserveBlocks } from '../../src/service/upload.js';

const MiB = 1024 * 1024;

t.test('write copies to any offset', async (t) => {
  const calls: number[] = [];
  const recording = new BodyArena(64 * 1024, 4, (target, offset, source) => {
    calls.push(offset);
    target.set(source, offset);
  });
  const arenas = [recording, new BodyArena(64 * 1024, 4)];
  for (const arena of arenas) {
    const large = randomBytes(100_003);
    const small = randomBytes(4095);
    arena.write(7, large);
    arena.write(100_010 + 3, small);
    t.ok(arena.bytes.subarray(7, 100_010).equals(large), 'the large write');
    t.ok(arena.bytes.subarray(100_013, 104_108).equals(small), 'the small write');
    t.equal(arena.bytes[6], 0, 'nothing before it');
    t.throws(() => {
      arena.write(arena.bytes.length - 10, large);
    }, 'a write past the end is refused');
  }
  t.same(calls, [7, 100_013, 262_134], 'every write goes through the copy function');
});

t.test('a block released twice is a bug, caught', async (t) => {
  const arena = new BodyArena(1024, 4);
  const block = arena.tryTake() as number;
  arena.release(block);
  t.throws(() => {
    arena.release(block);
  }, /released twice/);
  t.equal(arena.available, 4);
});

t.test('tryTake hands out every free block once', async (t) => {
  const arena = new BodyArena(1024, 64);
  const taken: number[] = [];
  for (let block = arena.tryTake(); block !== undefined; block = arena.tryTake()) taken.push(block);
  t.equal(taken.length, 64);
  t.equal(new Set(taken).size, 64, 'distinct blocks');
  t.equal(arena.available, 0);
  for (const block of taken) arena.release(block);
  t.equal(arena.available, 64);
});

t.test('admissions are served in order and nothing jumps the queue', async (t) => {
  const arena = new BodyArena(1024, 16);
  const held = await arena.takeMany(14);
  t.equal(arena.tryTakeMany(4), undefined, 'only two are free');
  const order: string[] = [];
  const first = arena.takeMany(4).then((blocks) => order.push(`first:${blocks.length}`));
  const second = arena.takeMany(2).then((blocks) => order.push(`second:${blocks.length}`));
  t.ok(arena.waiting);
  t.equal(arena.tryTake(), undefined, 'admissions are waiting');
  t.equal(arena.tryTakeMany(1), undefined, 'admissions are waiting');
  for (const block of held.splice(0, 4)) arena.release(block);
  await Promise.all([first, second]);
  t.same(order, ['first:4', 'second:2']);
  t.notOk(arena.waiting);
  t.equal(arena.available, 0);
});

t.test('owners take turns; each owner is served in arrival order', async (t) => {
  const arena = new BodyArena(1024, 8);
  const held = await arena.takeMany(8);
  const order: string[] = [];
  const granted = new Map<string, number[]>();
  const queue: Array<[name: string, owner: number, count: number]> = [
    ['a1', 1, 2],
    ['a2', 1, 2],
    ['a3', 1, 2],
    ['b1', 2, 3],
    ['c1', 3, 1],
    ['b2', 2, 1],
  ];
  for (const [name, owner, count] of queue) {
    void arena.takeMany(count, owner).then((blocks) => {
      order.push(name);
      granted.set(name, blocks);
    });
  }
  const release = async (blocks: number[]): Promise<void> => {
    for (const block of blocks) arena.release(block);
    await new Promise(setImmediate);
  };
  await release(held.splice(0, 2));
  t.same(order, ['a1']);
  await release(held.splice(0, 2));
  t.same(order, ['a1'], 'b1 needs three: c1 and a2 do not pass it');
  await release(held.splice(0, 1));
  t.same(order, ['a1', 'b1']);
  await release(held.splice(0, 1));
  t.same(order, ['a1', 'b1', 'c1']);
  await release(held.splice(0, 2));
  t.same(order, ['a1', 'b1', 'c1', 'a2']);
  await release(granted.get('a1') ?? []);
  t.same(order, ['a1', 'b1', 'c1', 'a2', 'b2'], 'owner 2 before owner 1 again');
  await release(granted.get('b1') ?? []);
  t.same(order, ['a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
  t.notOk(arena.waiting);
});

t.test('tryTakeMany takes all or nothing', async (t) => {
  const arena = new BodyArena(1024, 8);
  t.equal(arena.tryTakeMany(6)?.length, 6);
  t.equal(arena.tryTakeMany(3), undefined);
  t.equal(arena.available, 2, 'a refused request takes nothing');
  t.throws(() => arena.tryTakeMany(9), /larger than the arena/);
});

t.test('an upload reserve: a largest chunk, the pause slack and the resume gap', async (t) => {
  // 1 MiB average chunks cut at up to 4 MiB: 6 blocks wherever a chunk starts, 4 of slack and
  // 6 to resume with.
  t.equal(reserveBlocks(1024 * MiB, MiB, MiB), 16);
  t.equal(reserveBlocks(Number.MAX_SAFE_INTEGER, 2 * MiB, MiB), 20, 'larger chunks, more blocks');
  t.equal(reserveBlocks(3 * MiB, MiB, MiB), 3, 'never more than the body needs');
  t.equal(reserveBlocks(3 * MiB + 1, MiB, MiB), 4);
  t.equal(reserveBlocks(1, MiB, MiB), 1);
});
