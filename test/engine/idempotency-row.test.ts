// Goal: the `done` idempotency row a commit writes from the version's own encoding
// (`doneRowBytes`, the version encoded once for `versions`, `objects` and the row) is byte for
// byte what `encodeValue` gives for the whole row (docs/on-disk-format.md §2.6: one byte string
// per value and key order), and decodes to the same record; so the splice changes no stored byte.
// Method: fast-check versions of every shape the schema allows (optional fields, metadata and
// checksum maps, binary chunks, times above 2^32), encoded both ways; and a real putObject with
// an idempotency key, its row read back raw from the index and compared with `encodeValue`.
import t from 'tap';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { decodeValue, encodeValue } from '../../src/format/values.js';
import { EncodedRecord, IndexStore } from '../../src/engine/index/store.js';
import { DB, idempotencyKey, type IdempotencyRecord } from '../../src/engine/index/schema.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import { doneRowBytes } from '../../src/engine/ops/idempotency.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import { loadSettings } from '../../src/util/config.js';
import { tempDir } from './segment-testing.js';

const text = fc.string({ maxLength: 40 });
const version = fc.record(
  {
    key: fc.string({ minLength: 1, maxLength: 300 }),
    versionId: fc.oneof(fc.constant('null'), fc.stringMatching(/^[0-9a-f]{16}$/)),
    seq: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
    lastModified: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
    size: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
    etag: text,
    contentType: text,
    metadata: fc.dictionary(text, text, { maxKeys: 20 }),
    checksums: fc.dictionary(text, text, { maxKeys: 5 }),
    chunks: fc.uint8Array({ maxLength: 36 * 4 }).map((bytes) => Buffer.from(bytes)),
    storedBytes: fc.nat(),
    compressed: fc.boolean(),
    tags: fc.array(fc.record({ key: text, value: text }), { maxLength: 3 }),
    legalHold: fc.boolean(),
  },
  { requiredKeys: ['key', 'versionId', 'seq', 'lastModified', 'size', 'etag', 'chunks'] },
);

t.test('the spliced row is the encoded row, byte for byte', async (t) => {
  fc.assert(
    fc.property(
      version,
      text,
      fc.nat({ max: Number.MAX_SAFE_INTEGER }),
      fc.nat({ max: 2 ** 40 }),
      (result, fingerprint, startedAt, ttl) => {
        const record = {
          state: 'done' as const,
          fingerprint,
          startedAt,
          expiresAt: startedAt + ttl,
          result,
        } as unknown as IdempotencyRecord;
        const spliced = doneRowBytes(record, new EncodedRecord(encodeValue(1, result)));
        const whole = encodeValue(1, record);
        assert.ok(spliced.equals(whole), 'same bytes as encodeValue');
        assert.deepEqual(decodeValue(spliced).value, decodeValue(whole).value);
      },
    ),
    { numRuns: 300 },
  );
  t.pass('300 rows');
});

t.test("a commit's idempotency row is the encoded row", async (t) => {
  const store = IndexStore.open({ path: tempDir(t, 'lw-idem-row-'), readOnly: false });
  t.teardown(() => store.close());
  const context: EngineContext = {
    store,
    masterKey: randomBytes(32),
    settings: loadSettings({}),
    now: () => 1_765_000_000_123,
  };
  const segmentId = await store.transact(() => {
    control.createTenant(context, { id: 'acme' });
    objects.createBucket(context, { tenantId: 'acme', name: 'box' });
    return segments.allocSegment(context, { ownerPid: process.pid }).segmentId;
  });
  const version = await store.transact(() =>
    objects.putObject(context, {
      tenantId: 'acme',
      bucket: 'box',
      key: 'a/b.txt',
      size: 5,
      etag: '"e"',
      contentType: 'text/plain',
      metadata: { owner: 'ü' },
      checksums: { CRC32C: 'AAAAAA==' },
      compressed: false,
      chunks: [
        {
          id: randomBytes(32),
          plainLength: 5,
          location: { segmentId, offset: 64, length: 85, payloadChecksum: 1 },
        },
      ],
      idempotency: { key: 'idem-1', fingerprint: 'f1', inCommit: true },
    }),
  );
  const row = store.get<IdempotencyRecord>(DB.idempotency, idempotencyKey('acme', 'box', 'idem-1'));
  t.ok(row, 'the row is there');
  t.equal(row?.state, 'done');
  t.same(row?.result, version, 'it replays the committed version');
  let stored: Buffer | undefined;
  store.scanRaw(DB.idempotency, {}, (entry) => {
    stored = Buffer.from(entry.valueBytes.subarray(0, entry.valueLength));
    return false;
  });
  t.ok(
    stored?.equals(encodeValue(1, row as object)),
    'the stored bytes are encodeValue of the row',
  );
});
