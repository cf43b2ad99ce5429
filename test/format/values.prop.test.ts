// Goal: every JSON-like index value round trips and re-encodes to the same bytes
// (deterministic), and any byte string decodes to a value or a FormatError, nothing else.
// Method: fast-check properties (asserting with node:assert, so that fast-check sees a failure,
// shrinks it and prints its seed) over nested maps and arrays of strings, safe integers,
// finite doubles, booleans, null and buffers, and over arbitrary bytes behind a version byte.

import assert from 'node:assert/strict';
import fc from 'fast-check';
import t from 'tap';
import { decodeValue, encodeValue } from '../../src/format/values.js';
import { configureFastCheck, formatOutcome } from './format-testing.js';

configureFastCheck();

// msgpackr reads the key __proto__ back as __proto_ (a safety measure); the index never uses it.
const key = fc.string({ maxLength: 12 }).filter((name) => name !== '__proto__');
const leaf = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
  fc.double({ noNaN: true }).filter((number) => !Object.is(number, -0)),
  fc.boolean(),
  fc.constant(null),
  fc.uint8Array({ maxLength: 20 }).map((bytes) => Buffer.from(bytes)),
);
const tree = fc.letrec<{ node: unknown; map: Record<string, unknown>; list: unknown[] }>((tie) => ({
  node: fc.oneof({ depthSize: 'small' }, leaf, tie('list'), tie('map')),
  list: fc.array(tie('node'), { maxLength: 4 }),
  map: fc.dictionary(key, tie('node'), { maxKeys: 5, noNullPrototype: true }),
}));

t.test('decode(encode(x)) equals x, and re-encoding gives the same bytes', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 255 }), tree.map, (schemaVersion, value) => {
      const encoded = encodeValue(schemaVersion, value);
      const decoded = decodeValue(encoded);
      assert.equal(decoded.schemaVersion, schemaVersion);
      assert.deepEqual(decoded.value, value);
      assert.ok(encodeValue(schemaVersion, decoded.value).equals(encoded));
    }),
  );
  t.pass('property holds');
});

t.test('arbitrary bytes give a value or a format error', async (t) => {
  fc.assert(
    fc.property(fc.nat({ max: 255 }), fc.uint8Array({ maxLength: 100 }), (version, bytes) => {
      const source = Buffer.concat([Buffer.from([version]), bytes]);
      formatOutcome(() => decodeValue(source));
    }),
    { numRuns: 2000 },
  );
  t.pass('property holds');
});
