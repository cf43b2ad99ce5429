// Goal: for every valid input the segment header codec and the file naming rule round trip,
// and every byte string decodes to a header, FormatError or FormatTooNew, never anything else.
// Method: fast-check properties (asserting with node:assert, so that fast-check sees a failure,
// shrinks it and prints its seed) over valid fields, over arbitrary bytes with and without the
// magic in front, over every single-bit flip of a valid header, and over ids and names.

import assert from 'node:assert/strict';
import fc from 'fast-check';
import t from 'tap';
import {
  SEGMENT_HEADER_SIZE,
  decodeSegmentHeader,
  encodeSegmentHeader,
  parseSegmentFileName,
  segmentFileName,
} from '../../src/format/segment-header.js';
import { configureFastCheck, flipBit, formatOutcome } from './format-testing.js';

configureFastCheck();

const fieldsArbitrary = fc.record({ segmentId: fc.maxSafeNat(), createdAtMs: fc.maxSafeNat() });

t.test('decode(encode(x)) equals x', async (t) => {
  fc.assert(
    fc.property(fieldsArbitrary, (fields) => {
      const expected = { formatVersion: 1, headerSize: 64, flags: 0, ...fields };
      assert.deepEqual(decodeSegmentHeader(encodeSegmentHeader(fields)), expected);
    }),
  );
  t.pass('property holds');
});

t.test('arbitrary bytes give a header or a format error', async (t) => {
  const magic = Buffer.from('LWSEGMNT', 'latin1');
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 80 }), fc.boolean(), (bytes, withMagic) => {
      const source = withMagic ? Buffer.concat([magic, bytes]) : Buffer.from(bytes);
      formatOutcome(() => decodeSegmentHeader(source));
    }),
  );
  t.pass('property holds');
});

t.test('every single-bit flip is rejected', async (t) => {
  fc.assert(
    fc.property(fieldsArbitrary, fc.nat({ max: SEGMENT_HEADER_SIZE * 8 - 1 }), (fields, bit) => {
      const flipped = flipBit(encodeSegmentHeader(fields), bit);
      assert.notEqual(
        formatOutcome(() => decodeSegmentHeader(flipped)),
        'ok',
      );
    }),
  );
  t.pass('property holds');
});

t.test('file names round trip and sort in id order', async (t) => {
  fc.assert(
    fc.property(fc.maxSafeNat(), fc.maxSafeNat(), (a, b) => {
      assert.equal(parseSegmentFileName(segmentFileName(a)), a);
      const byName = segmentFileName(a) < segmentFileName(b);
      assert.equal(byName, a < b);
    }),
  );
  fc.assert(
    fc.property(fc.string({ maxLength: 24 }), (name) => {
      const segmentId = parseSegmentFileName(name);
      if (segmentId !== undefined) assert.equal(segmentFileName(segmentId), name);
    }),
  );
  t.pass('property holds');
});
