// Goal: the index keys that carry 64-bit integers (versions, segments, audit rows, outbox rows)
// hold them as u64 big-endian, byte for byte as docs/on-disk-format.md gives them, for every
// integer Lightwell stores (0 to 2^53 - 1), so keys sort by those integers.
// Method: each key function against a reference built with writeBigUInt64BE, at the 32-bit
// boundaries and for random integers (fast-check), and the sort order of neighbouring values.
import t from 'tap';
import fc from 'fast-check';
import {
  auditKey,
  bucketKeyOfSharedId,
  bucketSharedId,
  objectKey,
  outboxKey,
  segmentKey,
  tenantChildKey,
  SEQ_MAX,
  versionKey,
} from '../../src/engine/index/schema.js';

function u64(value: number): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64BE(BigInt(value), 0);
  return bytes;
}

const edges = [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 52, SEQ_MAX - 1, SEQ_MAX];
const integer = fc.oneof(fc.constantFrom(...edges), fc.integer({ min: 0, max: SEQ_MAX }));

t.test('u64 fields are the big-endian bytes of the integer', async (t) => {
  const base = objectKey(7, 'k');
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(integer, integer, (a, b) => {
        const outbox = outboxKey(7, 'cfg', a);
        return (
          segmentKey(a).equals(u64(a)) &&
          auditKey(a, b).equals(Buffer.concat([u64(a), u64(b)])) &&
          versionKey(7, 'k', a).equals(Buffer.concat([base, Buffer.from([0]), u64(SEQ_MAX - a)])) &&
          outbox.subarray(outbox.length - 8).equals(u64(a)) &&
          outbox[outbox.length - 9] === 0
        );
      }),
      { numRuns: 1000 },
    ),
  );
});

t.test('keys sort by their integers', async (t) => {
  for (const value of edges.filter((edge) => edge < SEQ_MAX)) {
    t.ok(Buffer.compare(segmentKey(value), segmentKey(value + 1)) < 0, `segment ${value}`);
    t.ok(Buffer.compare(auditKey(value, 0), auditKey(value + 1, 0)) < 0, `audit ${value}`);
    t.ok(
      Buffer.compare(versionKey(1, 'k', value + 1), versionKey(1, 'k', value)) < 0,
      `newer version first at ${value}`,
    );
  }
});

t.test('object and tenant-child keys are their parts concatenated, in UTF-8', async (t) => {
  const text = fc.string({ unit: 'grapheme', maxLength: 40 });
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 2 ** 32 - 1 }), text, (bucketId, key) => {
      const prefix = Buffer.alloc(4);
      prefix.writeUInt32BE(bucketId, 0);
      const expected = Buffer.concat([prefix, Buffer.from(key, 'utf8')]);
      t.ok(objectKey(bucketId, key).equals(expected));
    }),
  );
  fc.assert(
    fc.property(fc.string({ minLength: 1, maxLength: 20 }), text, (tenantId, name) => {
      const expected = Buffer.concat([
        Buffer.from(tenantId, 'utf8'),
        Buffer.from([0]),
        Buffer.from(name, 'utf8'),
      ]);
      t.ok(tenantChildKey(tenantId, name).equals(expected));
      const id = bucketSharedId(tenantId.replaceAll('\u0100', ''), name);
      t.ok(bucketKeyOfSharedId(id).equals(tenantChildKey(tenantId.replaceAll('\u0100', ''), name)));
    }),
  );
  t.ok(tenantChildKey('t1', 'bucket\u00e9').equals(Buffer.from('t1\u0000bucket\u00e9', 'utf8')));
});
