// Goal: `ownBytes` answers bytes that own their whole ArrayBuffer, so that a message to another
// thread copies only them: a view that already does is answered as it is (no copy); a slice of
// Node's buffer pool, a view into a larger buffer and a view of a SharedArrayBuffer are copied,
// and the copy holds the same bytes and nothing else.
// Method: each kind of view, checked by its ArrayBuffer's size and by identity.
import t from 'tap';
import { ownBytes } from '../../src/util/buffer-pool.js';

t.test('ownBytes: a view of a whole ArrayBuffer is answered as it is', async (t) => {
  const whole = new Uint8Array([1, 2, 3]);
  t.equal(ownBytes(whole), whole);
  const slow = Buffer.allocUnsafeSlow(32).fill(7);
  t.equal(ownBytes(slow), slow);
});

t.test('ownBytes: views into more memory are copied, exactly', async (t) => {
  const pooled = Buffer.from('a chunk id from the pool');
  t.ok(pooled.buffer.byteLength > pooled.length, 'Node pools small Buffers');
  const record = Buffer.alloc(2048, 5);
  record.write('0123456789abcdef0123456789abcdef', 100, 'latin1');
  const shared = new Uint8Array(new SharedArrayBuffer(64)).fill(4).subarray(0, 64);
  for (const [name, view] of [
    ['pool slice', pooled],
    ['view into a record', record.subarray(100, 132)],
    ['shared memory', shared],
  ] as const) {
    const own = ownBytes(view);
    t.not(own, view, name);
    t.equal(own.byteOffset, 0, name);
    t.equal(own.buffer.byteLength, view.length, name);
    t.notOk(own.buffer instanceof SharedArrayBuffer, name);
    t.same(Buffer.from(own), Buffer.from(view), name);
  }
});
