// Goal: the record frame codec round trips every valid record; decodeRecordHeader answers any
// bytes with a header or a FormatError only; scanRecords never throws on any bytes, and on a
// segment cut or damaged anywhere it stops exactly at the last intact record.
// Method: fast-check properties (asserting with node:assert, so that fast-check sees a failure,
// shrinks it and prints its seed). Segments are built from arbitrary valid records, optionally
// closed by a seal footer, then cut at every possible length, bit-flipped anywhere, or followed
// by arbitrary garbage.

import assert from 'node:assert/strict';
import fc from 'fast-check';
import t from 'tap';
import {
  decodeRecordHeader,
  encodeRecord,
  scanRecords,
  verifyPayload,
  type RecordScan,
} from '../../src/format/record-frame.js';
import { encodeSealFooter } from '../../src/format/seal-footer.js';
import { SEGMENT_HEADER_SIZE, encodeSegmentHeader } from '../../src/format/segment-header.js';
import {
  configureFastCheck,
  flipBit,
  formatOutcome,
  recordInputArbitrary,
} from './format-testing.js';

configureFastCheck();

interface Segment {
  readonly bytes: Buffer;
  /** End offset of every record, in order (each is a valid truncation point). */
  readonly ends: number[];
}

const segmentArbitrary: fc.Arbitrary<Segment> = fc
  .record({
    inputs: fc.array(recordInputArbitrary, { maxLength: 6 }),
    sealed: fc.boolean(),
    sealedAtMs: fc.maxSafeNat(),
  })
  .map(({ inputs, sealed, sealedAtMs }) => {
    const parts = [encodeSegmentHeader({ segmentId: 9, createdAtMs: 0 })];
    const ends: number[] = [];
    let end = SEGMENT_HEADER_SIZE;
    for (const { fields, payload } of inputs) {
      const record = encodeRecord(fields, payload);
      parts.push(record);
      end += record.length;
      ends.push(end);
    }
    if (sealed) {
      const footer = encodeSealFooter({ recordCount: inputs.length, dataEnd: end, sealedAtMs });
      parts.push(footer);
      ends.push(end + footer.length);
    }
    return { bytes: Buffer.concat(parts), ends };
  });

/** The invariants of every scan, whatever the bytes. */
function assertScanShape(scan: RecordScan, source: Buffer, startOffset: number): void {
  assert.ok(scan.validEnd >= startOffset && scan.validEnd <= source.length);
  assert.equal(scan.torn, scan.validEnd < source.length);
  assert.equal(scan.problem === undefined, !scan.torn);
  let offset = startOffset;
  for (const record of scan.records) {
    assert.equal(record.offset, offset);
    offset += record.header.recordLength;
  }
  assert.equal(offset, scan.validEnd);
}

t.test('decode(encode(x)) equals x', async (t) => {
  fc.assert(
    fc.property(recordInputArbitrary, ({ fields, payload }) => {
      const record = encodeRecord(fields, payload);
      const header = decodeRecordHeader(record, 0);
      assert.equal(header.kind, fields.kind);
      assert.equal(header.compression, fields.compression);
      assert.equal(header.cipher, fields.cipher);
      assert.equal(header.tenantNum, fields.tenantNum);
      assert.equal(header.plainLength, fields.plainLength);
      assert.equal(header.payloadLength, payload.length);
      assert.equal(header.recordLength, record.length);
      assert.ok(header.chunkId.equals(fields.chunkId));
      assert.ok(header.nonce.equals(fields.nonce));
      verifyPayload(header, record.subarray(80));
    }),
  );
  t.pass('property holds');
});

t.test('arbitrary bytes give a header or a format error', async (t) => {
  const magic = Buffer.from('LWR1', 'latin1');
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 120 }),
      fc.boolean(),
      fc.nat({ max: 130 }),
      (bytes, withMagic, offset) => {
        const source = withMagic ? Buffer.concat([magic, bytes]) : Buffer.from(bytes);
        formatOutcome(() => decodeRecordHeader(source, offset));
      },
    ),
  );
  t.pass('property holds');
});

t.test('scanRecords never throws on arbitrary bytes', async (t) => {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 600 }),
      fc.boolean(),
      fc.nat(),
      (bytes, withMagic, seed) => {
        const source = Buffer.from(bytes);
        // Start with the record magic sometimes, so that the scan gets past its first check.
        if (withMagic && source.length >= 4) source.write('LWR1', 0, 'latin1');
        const startOffset = source.length === 0 ? 0 : seed % (source.length + 1);
        assertScanShape(scanRecords(source, startOffset), source, startOffset);
      },
    ),
  );
  t.pass('property holds');
});

t.test('a segment cut anywhere scans to the last complete record', async (t) => {
  fc.assert(
    fc.property(segmentArbitrary, fc.nat(), ({ bytes, ends }, seed) => {
      const full = scanRecords(bytes, SEGMENT_HEADER_SIZE);
      assert.deepEqual(
        full.records.map((record) => record.offset + record.header.recordLength),
        ends,
      );
      assert.equal(full.torn, false);
      const cut = SEGMENT_HEADER_SIZE + (seed % (bytes.length - SEGMENT_HEADER_SIZE + 1));
      const source = bytes.subarray(0, cut);
      const scan = scanRecords(source, SEGMENT_HEADER_SIZE);
      assertScanShape(scan, source, SEGMENT_HEADER_SIZE);
      const complete = ends.filter((end) => end <= cut);
      assert.equal(scan.validEnd, complete.at(-1) ?? SEGMENT_HEADER_SIZE);
      assert.equal(scan.records.length, complete.length);
      assert.equal(scan.torn, cut !== scan.validEnd);
    }),
  );
  t.pass('property holds');
});

t.test('a flipped bit stops the scan at the start of its record', async (t) => {
  fc.assert(
    fc.property(
      segmentArbitrary.filter(({ ends }) => ends.length > 0),
      fc.nat(),
      ({ bytes, ends }, seed) => {
        const recordBits = (bytes.length - SEGMENT_HEADER_SIZE) * 8;
        const bit = SEGMENT_HEADER_SIZE * 8 + (seed % recordBits);
        const flipped = flipBit(bytes, bit);
        const scan = scanRecords(flipped, SEGMENT_HEADER_SIZE);
        assertScanShape(scan, flipped, SEGMENT_HEADER_SIZE);
        const damagedIndex = ends.findIndex((end) => end * 8 > bit);
        const damagedStart = damagedIndex === 0 ? SEGMENT_HEADER_SIZE : ends[damagedIndex - 1];
        assert.equal(scan.validEnd, damagedStart);
        assert.equal(scan.records.length, damagedIndex);
        assert.equal(scan.torn, true);
      },
    ),
  );
  t.pass('property holds');
});

t.test('garbage after a segment never hides its records', async (t) => {
  fc.assert(
    fc.property(segmentArbitrary, fc.uint8Array({ maxLength: 200 }), ({ bytes, ends }, tail) => {
      const source = Buffer.concat([bytes, tail]);
      const scan = scanRecords(source, SEGMENT_HEADER_SIZE);
      assertScanShape(scan, source, SEGMENT_HEADER_SIZE);
      assert.ok(scan.validEnd >= bytes.length);
      assert.ok(scan.records.length >= ends.length);
    }),
  );
  t.pass('property holds');
});
