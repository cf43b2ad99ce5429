// Goal: the body arena's block accounting. `tryTake` never hands out the spill reserve (the
// last blocks, kept for bytes that arrive after an upload paused its socket) and never jumps
// ahead of a waiting admission; `tryTakeSpill` hands out any free block; `takeMany` admits in
// arrival order once enough blocks are free; small arenas keep no reserve.
// Method: a real BodyArena with small blocks.
import t from 'tap';
import { BodyArena } from '../../src/gateway/body-arena.js';

t.test('tryTake leaves the spill reserve; tryTakeSpill takes it', async (t) => {
  const arena = new BodyArena(1024, 64);
  t.equal(arena.spillReserve, 8);
  const taken: number[] = [];
  for (let block = arena.tryTake(); block !== undefined; block = arena.tryTake()) taken.push(block);
  t.equal(taken.length, 56, 'all but the reserve');
  t.equal(new Set(taken).size, 56, 'distinct blocks');
  const spill: number[] = [];
  for (let block = arena.tryTakeSpill(); block !== undefined; block = arena.tryTakeSpill())
    spill.push(block);
  t.equal(spill.length, 8, 'the reserve goes to spills');
  t.equal(arena.available, 0);
  for (const block of [...taken, ...spill]) arena.release(block);
  t.equal(arena.available, 64);
});

t.test('admissions are served in order and tryTake does not jump the queue', async (t) => {
  const arena = new BodyArena(1024, 16);
  t.equal(arena.spillReserve, 2);
  const held = await arena.takeMany(14);
  const order: string[] = [];
  const first = arena.takeMany(4).then((blocks) => order.push(`first:${blocks.length}`));
  const second = arena.takeMany(2).then((blocks) => order.push(`second:${blocks.length}`));
  t.equal(arena.tryTake(), undefined, 'admissions are waiting');
  for (const block of held.splice(0, 4)) arena.release(block);
  await Promise.all([first, second]);
  t.same(order, ['first:4', 'second:2']);
});

t.test('a small arena keeps no spill reserve', async (t) => {
  const arena = new BodyArena(1024, 4);
  t.equal(arena.spillReserve, 0);
  t.not(arena.tryTake(), undefined);
});
