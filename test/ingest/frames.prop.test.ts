// Goal: the ingest codec turns any bytes into a frame or a FrameError and nothing else; what it
// encodes it decodes to the same fields; and a body split into OBJECT and DATA frames at any
// points arrives whole, while a stream missing part of a body is refused.
// Method: fast-check over arbitrary object headers and bodies (round trip), over valid frames
// cut short at every length or with one bit flipped, over arbitrary bytes, and over arbitrary
// split points of a body fed through StreamRules.

import assert from 'node:assert/strict';
import fc from 'fast-check';
import t from 'tap';
import {
  CHECKSUM_CODES,
  FRAME_OBJECT,
  decodeClientFrame,
  decodeServerFrame,
  encodeData,
  encodeObject,
  type DataFrame,
  type ObjectFrame,
  type ObjectHeader,
} from '../../src/ingest/frames.js';
import { StreamRules } from '../../src/ingest/stream-rules.js';
import { isLightwellError } from '../../src/util/errors.js';
import { goldenFrames } from './frame-fixtures.js';

const ascii = fc.string({ unit: fc.constantFrom(...'abcXYZ019-_./*"'.split('')), minLength: 1 });

const header: fc.Arbitrary<ObjectHeader> = fc.record({
  sequence: fc.nat(),
  size: fc.nat({ max: 4096 }),
  bucket: fc.string({ maxLength: 20 }),
  key: fc.string({ minLength: 1, maxLength: 200 }),
  contentType: fc.oneof(fc.constant(''), ascii),
  metadata: fc.array(fc.tuple(ascii, fc.string({ maxLength: 40 })), { maxLength: 4 }),
  checksums: fc
    .subarray(CHECKSUM_CODES.map(([, alg, length]) => [alg, length] as const))
    .chain((algs) =>
      fc.tuple(
        ...algs.map(([alg, length]) =>
          fc.tuple(fc.constant(alg), fc.uint8Array({ minLength: length, maxLength: length })),
        ),
      ),
    ),
  idempotencyKey: fc.oneof(fc.constant(''), ascii),
  ifMatch: fc.string({ maxLength: 30 }),
  ifNoneMatch: fc.boolean(),
});

/** Decodes and says whether it answered with a frame or a codec error; anything else throws. */
function decodeOrRefuse(bytes: Uint8Array, server = false): 'frame' | 'refused' {
  try {
    if (server) decodeServerFrame(bytes);
    else decodeClientFrame(bytes);
    return 'frame';
  } catch (error) {
    assert.ok(
      isLightwellError(error) && error.details['frame'] === true,
      `not a codec error: ${String(error)}`,
    );
    assert.equal(typeof error.details['closeCode'], 'number');
    return 'refused';
  }
}

const plain = (frame: ObjectFrame): unknown => ({
  ...frame,
  body: Buffer.from(frame.body),
  checksums: frame.checksums.map(([alg, digest]) => [alg, Buffer.from(digest)]),
});

t.test('OBJECT frames round-trip', async () => {
  fc.assert(
    fc.property(header, fc.uint8Array({ maxLength: 64 }), (fields, bytes) => {
      const body = bytes.subarray(0, fields.size);
      const frame = decodeClientFrame(encodeObject(fields, body));
      assert.equal(frame.type, FRAME_OBJECT);
      assert.deepEqual(plain(frame), plain({ type: FRAME_OBJECT, ...fields, body }));
    }),
  );
});

const validFrames = Object.entries(goldenFrames);

t.test('every truncation and every bit flip is a frame or a codec error', async () => {
  for (const [name, bytes] of validFrames) {
    const server = name === 'welcome' || name === 'ack' || name === 'credit';
    for (let length = 0; length < bytes.length; length += 1)
      decodeOrRefuse(bytes.subarray(0, length), server);
    for (let bit = 0; bit < bytes.length * 8; bit += 1) {
      const flipped = Uint8Array.from(bytes);
      flipped[bit >> 3] = (flipped[bit >> 3] ?? 0) ^ (1 << (bit & 7));
      decodeOrRefuse(flipped, server);
    }
  }
  fc.assert(
    fc.property(header, fc.nat(), fc.nat(), (fields, cut, bit) => {
      const bytes = encodeObject(fields);
      decodeOrRefuse(bytes.subarray(0, cut % (bytes.length + 1)));
      const flipped = Uint8Array.from(bytes);
      const at = bit % (bytes.length * 8);
      flipped[at >> 3] = (flipped[at >> 3] ?? 0) ^ (1 << (at & 7));
      decodeOrRefuse(flipped);
    }),
  );
});

t.test('arbitrary bytes are a frame or a codec error', async () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), fc.boolean(), (bytes, server) => {
      decodeOrRefuse(bytes, server);
      if (bytes.length > 0) {
        // The same bytes behind each type code.
        for (const type of [0x01, 0x02, 0x03, 0x04, 0x81, 0x82, 0x83]) {
          const typed = Uint8Array.from(bytes);
          typed[0] = type;
          decodeOrRefuse(typed, server);
        }
      }
    }),
    { numRuns: 300 },
  );
});

/** Frames of `body` split at `cuts` (OBJECT carries the first part). */
function framesOf(sequence: number, body: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((cut) => cut % (body.length + 1)))].sort((a, b) => a - b);
  const parts: Uint8Array[] = [];
  let start = 0;
  for (const point of [...points, body.length]) {
    if (point <= start && parts.length > 0) continue;
    parts.push(body.subarray(start, point));
    start = point;
  }
  const [first = new Uint8Array(0), ...rest] = parts;
  const fields = { ...objectFields, sequence, size: body.length };
  return [encodeObject(fields, first), ...rest.map((part) => encodeData(sequence, part))];
}

const objectFields: ObjectHeader = {
  sequence: 0,
  size: 0,
  bucket: '',
  key: 'k',
  contentType: '',
  metadata: [],
  checksums: [],
  idempotencyKey: '',
  ifMatch: '',
  ifNoneMatch: false,
};

t.test('a body split at any points arrives whole; a missing part is refused', async () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(), { maxLength: 6 })), {
        minLength: 1,
        maxLength: 5,
      }),
      fc.nat(),
      (objects, drop) => {
        const rules = new StreamRules({ windowObjects: 100, windowBytes: 1 << 20 });
        const stream = objects.flatMap(([body, cuts], index) => framesOf(index, body, cuts));
        const received = objects.map(() => [] as Uint8Array[]);
        for (const bytes of stream) {
          const frame = decodeClientFrame(bytes);
          if (frame.type === FRAME_OBJECT) rules.begin(frame);
          else if (frame.type === 0x03) rules.data(frame);
          if (frame.type === FRAME_OBJECT || frame.type === 0x03)
            received[frame.sequence]?.push(frame.body);
        }
        objects.forEach(([body], index) =>
          assert.deepEqual(Buffer.concat(received[index] ?? []), Buffer.from(body)),
        );
        assert.equal(rules.openSequence, undefined);
        // Without one DATA frame, the next OBJECT (or the stream's end) finds the body open.
        const dataAt = stream.flatMap((bytes, index) => (bytes[0] === 0x03 ? [index] : []));
        if (dataAt.length === 0) return;
        const missing = dataAt[drop % dataAt.length] as number;
        const cut = new StreamRules({ windowObjects: 100, windowBytes: 1 << 20 });
        let refused = false;
        for (const [index, bytes] of stream.entries()) {
          if (index === missing) continue;
          const frame = decodeClientFrame(bytes);
          try {
            if (frame.type === FRAME_OBJECT) cut.begin(frame);
            else if (frame.type === 0x03) cut.data(frame);
          } catch (error) {
            assert.ok(isLightwellError(error) && error.details['frame'] === true);
            refused = true;
            break;
          }
        }
        assert.ok(refused || cut.openSequence !== undefined, 'the gap is seen');
      },
    ),
  );
});

function closeCodeOf(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return isLightwellError(error) ? error.details['closeCode'] : error;
  }
  return undefined;
}

t.test('the window refuses an object or bytes beyond it', async (t) => {
  const rules = new StreamRules({ windowObjects: 2, windowBytes: 100 });
  const object = (sequence: number, size: number, first = size): ObjectFrame =>
    decodeClientFrame(
      encodeObject({ ...objectFields, sequence, size }, new Uint8Array(first)),
    ) as ObjectFrame;
  const data = (sequence: number, size: number): DataFrame =>
    decodeClientFrame(encodeData(sequence, new Uint8Array(size))) as DataFrame;
  t.equal(
    closeCodeOf(() => rules.begin(object(1, 101))),
    4429,
    'first body bytes',
  );
  rules.begin(object(2, 500, 60));
  t.equal(
    closeCodeOf(() => rules.data(data(2, 41))),
    4429,
    'DATA beyond the credit',
  );
  rules.data(data(2, 40));
  rules.credit(100);
  t.equal(rules.bytesOutstanding, 0);
  rules.data(data(2, 100));
  rules.credit(100);
  t.equal(
    closeCodeOf(() => rules.begin(object(3, 0))),
    4400,
    'OBJECT inside a body',
  );
  rules.data(data(2, 100));
  rules.credit(100);
  rules.data(data(2, 100));
  rules.credit(100);
  rules.data(data(2, 100));
  t.equal(rules.openSequence, undefined, 'the body is complete');
  rules.credit(100);
  rules.begin(object(3, 0));
  t.equal(
    closeCodeOf(() => rules.begin(object(4, 0))),
    4429,
    'objects',
  );
  t.equal(
    closeCodeOf(() => rules.begin(object(3, 0))),
    4400,
    'sequence',
  );
  rules.settle(2);
  rules.begin(object(5, 10));
  t.equal(rules.objectsInFlight, 2);
  t.equal(rules.bytesOutstanding, 10);
});
