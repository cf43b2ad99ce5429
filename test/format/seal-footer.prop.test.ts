// Goal: every possible seal footer round trips, and every byte string given to the footer
// decoder yields a footer or a FormatError, never anything else.
// Method: fast-check properties (asserting with node:assert, so that fast-check sees a failure,
// shrinks it and prints its seed) over valid footers, over arbitrary bytes behind a valid seal
// record header, and over every single-bit flip of a valid footer record.

import assert from 'node:assert/strict';
import fc from 'fast-check';
import t from 'tap';
import {
  SEAL_RECORD_SIZE,
  decodeSealFooter,
  encodeSealFooter,
  type SealFooter,
} from '../../src/format/seal-footer.js';
import { SEGMENT_HEADER_SIZE } from '../../src/format/segment-header.js';
import { configureFastCheck, flipBit, formatOutcome } from './format-testing.js';

configureFastCheck();

const footerArbitrary: fc.Arbitrary<SealFooter> = fc
  .record({
    dataEnd: fc.integer({ min: SEGMENT_HEADER_SIZE, max: Number.MAX_SAFE_INTEGER }),
    sealedAtMs: fc.maxSafeNat(),
  })
  .chain(({ dataEnd, sealedAtMs }) =>
    fc
      .nat({ max: Math.floor((dataEnd - SEGMENT_HEADER_SIZE) / 80) })
      .map((recordCount) => ({ recordCount, dataEnd, sealedAtMs })),
  );

t.test('decode(encode(x)) equals x', async (t) => {
  fc.assert(
    fc.property(footerArbitrary, (footer) => {
      assert.deepEqual(decodeSealFooter(encodeSealFooter(footer), 0), footer);
    }),
  );
  t.pass('property holds');
});

t.test('arbitrary bytes give a footer or a format error', async (t) => {
  const header = encodeSealFooter({ recordCount: 0, dataEnd: 64, sealedAtMs: 0 }).subarray(0, 80);
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 140 }), fc.boolean(), (bytes, withHeader) => {
      const source = withHeader ? Buffer.concat([header, bytes]) : Buffer.from(bytes);
      formatOutcome(() => decodeSealFooter(source, 0));
    }),
  );
  t.pass('property holds');
});

t.test('every single-bit flip is rejected', async (t) => {
  fc.assert(
    fc.property(footerArbitrary, fc.nat({ max: SEAL_RECORD_SIZE * 8 - 1 }), (footer, bit) => {
      const flipped = flipBit(encodeSealFooter(footer), bit);
      assert.notEqual(
        formatOutcome(() => decodeSealFooter(flipped, 0)),
        'ok',
      );
    }),
  );
  t.pass('property holds');
});
