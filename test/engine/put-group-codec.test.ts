// Goal: the compact encoding of a `putObjects` group (src/engine/put-group-codec.ts) decodes to
// exactly the items it encoded, whatever they hold (known fields of the wrong kind, rare fields,
// `undefined`, non-ASCII strings, strings repeated from the item before or not), and turns any
// damaged buffer into a `bad_request` or into items, never into another error.
// Method: fast-check over items built like the service's `putObject` arguments with arbitrary
// extras, compared with node's deep strict equality; every truncation and single bit flip of
// an encoded group, and arbitrary bytes, through the decoder.

import assert from 'node:assert/strict';
import fc from 'fast-check';
import t from 'tap';
import { decodePutGroup, encodePutGroup } from '../../src/engine/put-group-codec.js';
import { errorCode } from '../../src/util/errors.js';

const text = fc.oneof(fc.string({ maxLength: 80 }), fc.constantFrom('bench', 'tnt_a', 'é€😀'));
const chunk = fc.record(
  {
    id: fc.uint8Array({ minLength: 32, maxLength: 32 }).map((bytes) => Buffer.from(bytes)),
    plainLength: fc.nat(),
    location: fc.record(
      {
        segmentId: fc.nat(),
        offset: fc.maxSafeNat(),
        length: fc.nat(),
        payloadChecksum: fc.integer({ min: 0, max: 0xffffffff }),
      },
      { noNullPrototype: true },
    ),
  },
  { requiredKeys: ['id', 'plainLength'], noNullPrototype: true },
);
const audit = fc.record(
  {
    requestId: text,
    actor: text,
    action: fc.constant('putObject'),
    resource: text,
    outcome: fc.constantFrom('success', 'failure'),
    status: fc.constantFrom(200, 412),
    remoteAddr: fc.constant('127.0.0.1'),
    time: fc.maxSafeNat(),
    tenantId: fc.oneof(text, fc.constant(undefined)),
    dryRun: fc.boolean(),
  },
  { requiredKeys: ['requestId', 'actor', 'action'], noNullPrototype: true },
);
/** An item shaped like the service's, with any field possibly missing, odd or extra. */
const item = fc.record(
  {
    tenantId: text,
    bucket: text,
    bucketId: fc.oneof(fc.nat(), fc.constant('7')),
    key: text,
    size: fc.oneof(fc.nat(), fc.double()),
    etag: text,
    contentType: fc.oneof(text, fc.constant(undefined)),
    metadata: fc.oneof(
      fc.dictionary(text, text, { maxKeys: 3, noNullPrototype: true }),
      fc.constant({ a: 1 }),
    ),
    checksums: fc.dictionary(fc.constantFrom('CRC32C', 'SHA256'), text, { noNullPrototype: true }),
    compressed: fc.boolean(),
    chunks: fc.oneof(
      fc.array(chunk, { maxLength: 3 }),
      fc.constant([{ id: Buffer.alloc(5), plainLength: 5 }]),
    ),
    idempotency: fc.record(
      { key: text, fingerprint: text, claim: text, inCommit: fc.boolean() },
      { requiredKeys: ['key', 'fingerprint'], noNullPrototype: true },
    ),
    caller: text,
    audit,
    ifNoneMatch: fc.constant('*'),
    headers: fc.dictionary(text, text, { maxKeys: 2, noNullPrototype: true }),
    tags: fc.array(fc.record({ key: text, value: text }, { noNullPrototype: true }), {
      maxLength: 2,
    }),
  },
  { requiredKeys: [], noNullPrototype: true },
);

t.test('a group decodes to the items it encoded', async () => {
  fc.assert(
    fc.property(fc.array(item, { minLength: 1, maxLength: 6 }), (items) => {
      assert.deepStrictEqual(decodePutGroup(encodePutGroup(items)), items);
    }),
    { numRuns: 300 },
  );
});

t.test('items that repeat their fields decode each to its own values', async (t) => {
  const items = [0, 1, 2].map((index) => ({
    tenantId: 'tnt_a',
    bucket: 'b',
    key: index === 1 ? 'same' : `k${index}`,
    audit: { requestId: `r${index}`, actor: 'AK', action: 'putObject' },
  }));
  items[2]!.key = 'same';
  const decoded = decodePutGroup(encodePutGroup(items));
  t.same(decoded, items);
  // Repeated strings are sent once: the group is shorter than its fields written out.
  const spelledOut = items
    .map((one) => JSON.stringify(one).length)
    .reduce((sum, length) => sum + length, 0);
  t.ok(encodePutGroup(items).length < spelledOut, 'repeated strings are not sent again');
});

/** Decodes `bytes`: items, or a bad_request; anything else fails the test. */
function decodesOrRefuses(bytes: Uint8Array): void {
  try {
    decodePutGroup(bytes);
  } catch (error) {
    assert.equal(errorCode(error), 'bad_request', String(error));
  }
}

t.test('a damaged group is refused with bad_request, never another error', async (t) => {
  const items = fc.sample(fc.array(item, { minLength: 2, maxLength: 3 }), { numRuns: 3, seed: 7 });
  for (const group of items) {
    const encoded = encodePutGroup(group);
    for (let length = 0; length < encoded.length; length++) {
      assert.throws(() => decodePutGroup(encoded.subarray(0, length)), /./);
      decodesOrRefuses(encoded.subarray(0, length));
    }
    for (let bit = 0; bit < encoded.length * 8; bit += 3) {
      const flipped = Buffer.from(encoded);
      flipped[bit >> 3]! ^= 1 << (bit & 7);
      decodesOrRefuses(flipped);
    }
  }
  fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => decodesOrRefuses(bytes)));
  t.pass('every damaged group decoded or was refused');
});
