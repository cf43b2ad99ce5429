// Goal: for every valid input the FORMAT marker codec round trips, and for every byte string it
// answers a valid marker, FormatError or FormatTooNew, never anything else.
// Method: fast-check properties (asserting with node:assert, so that fast-check sees a failure,
// shrinks it and prints its seed) over valid fields, over arbitrary bytes (with and without the
// magic in front, so that the decoder gets past the first check), and over every single-bit
// flip of a valid marker, which the checksum must always catch.

import assert from 'node:assert/strict';
import fc from 'fast-check';
import t from 'tap';
import { MARKER_SIZE, decodeMarker, encodeMarker } from '../../src/format/marker.js';
import { configureFastCheck, flipBit, formatOutcome } from './format-testing.js';

configureFastCheck();

const fieldsArbitrary = fc.record({
  createdBy: fc.stringMatching(/^[\x20-\x7e]{1,16}$/),
  createdAtMs: fc.maxSafeNat(),
});

t.test('decode(encode(x)) equals x', async (t) => {
  fc.assert(
    fc.property(fieldsArbitrary, (fields) => {
      const expected = { formatVersion: 1, flags: 0, ...fields };
      assert.deepEqual(decodeMarker(encodeMarker(fields)), expected);
    }),
  );
  t.pass('property holds');
});

t.test('arbitrary bytes give a marker or a format error', async (t) => {
  const magic = Buffer.from('LWFORMAT', 'latin1');
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 80 }), fc.boolean(), (bytes, withMagic) => {
      const source = withMagic ? Buffer.concat([magic, bytes]) : Buffer.from(bytes);
      formatOutcome(() => decodeMarker(source));
    }),
  );
  t.pass('no other error');
});

t.test('every single-bit flip is rejected', async (t) => {
  fc.assert(
    fc.property(fieldsArbitrary, fc.nat({ max: MARKER_SIZE * 8 - 1 }), (fields, bit) => {
      const flipped = flipBit(encodeMarker(fields), bit);
      assert.notEqual(
        formatOutcome(() => decodeMarker(flipped)),
        'ok',
      );
    }),
  );
  t.pass('property holds');
});
