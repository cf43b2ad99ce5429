// The slabs that small whole bodies of the ingest stream are copied into (src/ingest/server.ts):
// each copy holds its own bytes, and the bytes a slab holds count towards the listener's bound
// from its allocation until the last body copied into it is settled, whatever the order.

import t from 'tap';
import { SLAB_BODY_BYTES_MAX, SLAB_BYTES, Slabs } from '../../src/ingest/server.js';

function counted(): { slabs: Slabs; held: () => number } {
  let held = 0;
  const slabs = new Slabs((bytes) => (held += bytes));
  return { slabs, held: () => held };
}

t.test('copies keep their own bytes after the frame is reused', async (t) => {
  const { slabs } = counted();
  const frame = new Uint8Array(4096);
  const copies = [];
  for (let i = 0; i < 100; i++) {
    frame.fill(i);
    copies.push(slabs.copy(frame));
  }
  frame.fill(255);
  copies.forEach((copy, i) => {
    t.equal(copy.bytes.length, 4096);
    t.ok(
      copy.bytes.every((byte) => byte === i),
      `copy ${i} holds its own bytes`,
    );
  });
});

t.test('a slab is held until its last body settles, in any order', async (t) => {
  const { slabs, held } = counted();
  t.equal(slabs.growth(4096), SLAB_BYTES, 'the first copy needs a slab');
  const perSlab = SLAB_BYTES / SLAB_BODY_BYTES_MAX;
  const first = Array.from({ length: perSlab }, () =>
    slabs.copy(new Uint8Array(SLAB_BODY_BYTES_MAX)),
  );
  t.equal(held(), SLAB_BYTES);
  t.equal(slabs.growth(1), SLAB_BYTES, 'a full slab makes the next copy need another');
  const second = slabs.copy(new Uint8Array(10));
  t.equal(held(), 2 * SLAB_BYTES, 'the retired slab still counts while its bodies are held');
  t.equal(slabs.growth(10), 0, 'room left in the current slab');
  // Settled last to first, one twice: the retired slab is let go once, with its last body.
  for (const copy of first.slice(1).reverse()) copy.release();
  first[1]?.release();
  t.equal(held(), 2 * SLAB_BYTES);
  first[0]?.release();
  t.equal(held(), SLAB_BYTES, 'the retired slab is let go with its last body');
  second.release();
  t.equal(held(), SLAB_BYTES, 'the current slab stays for the next bodies');
  // Fill the current slab with bodies settled at once: the next slab replaces an idle one.
  for (let i = 0; i < perSlab; i++) slabs.copy(new Uint8Array(SLAB_BODY_BYTES_MAX)).release();
  t.equal(held(), SLAB_BYTES, 'a slab with nothing held is let go when it is replaced');
});
