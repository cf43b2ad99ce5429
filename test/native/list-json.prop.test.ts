// Goal: the in-place listing writer (src/native/list-json.ts) writes exactly the bytes of
// JSON.stringify(objectJson(decodeValue(record), bucket)) for every record it accepts, declines
// (leaving the page as it was) every record it cannot reproduce, and accepts every record
// Lightwell writes: objects, delete markers, null and generated version ids, metadata,
// checksums, tags, retention and legal hold.
// Method: fast-check records with every field present or missing, mistyped, in any order,
// with awkward strings, names and numbers; encoded by the index codec and by a loose msgpack
// encoder that picks any header form, repeats names and appends or cuts bytes; also random
// bytes and single-byte mutations. Each is compared with the full decoder's answer, in a value
// buffer longer than the record (as LMDB's shared read buffer is).
import t from 'tap';
import fc from 'fast-check';
import { encodeValue, decodeValue } from '../../src/format/values.js';
import { JsonWriter, writeVersionJson } from '../../src/native/list-json.js';
import { objectJson } from '../../src/native/routes.js';
import type { BucketRecord, ObjectVersionRecord } from '../../src/engine/index/schema.js';

const bucket = (versioning: BucketRecord['versioning']): BucketRecord => ({
  id: 1,
  tenantId: 't',
  name: 'b',
  createdAt: 0,
  versioning,
  objectLock: versioning !== 'Unversioned',
});
const versionings = ['Unversioned', 'Enabled', 'Suspended'] as const;

/** The full decoder's JSON, or undefined when it throws. */
function reference(bytes: Buffer, versioning: BucketRecord['versioning']): string | undefined {
  try {
    const value = decodeValue(bytes).value as unknown as ObjectVersionRecord;
    return JSON.stringify(objectJson(value, bucket(versioning)));
  } catch {
    return undefined;
  }
}

/** Runs the writer on `bytes` inside a longer buffer, after text already on the page. */
function written(bytes: Buffer, versioning: BucketRecord['versioning']): string | undefined {
  const value = Buffer.concat([bytes, Buffer.from('\u00ff\u0000tail-bytes', 'latin1')]);
  const page = new JsonWriter(8);
  page.ascii('[');
  const before = page.length;
  const ok = writeVersionJson(page, value, bytes.length, versioning !== 'Unversioned');
  if (!ok) {
    if (page.length !== before) throw new RangeError('a declined record changed the page');
    return undefined;
  }
  return page.view().toString('utf8', before);
}

/** Records the writer accepted, so that a property cannot pass by declining everything. */
let accepted = 0;

/** Accepted records must match the full decoder exactly. */
function agrees(bytes: Buffer): boolean {
  for (const versioning of versionings) {
    const fast = written(bytes, versioning);
    if (fast === undefined) continue;
    accepted += 1;
    if (fast !== reference(bytes, versioning)) return false;
  }
  return true;
}

// ---- a loose msgpack encoder: any header form that fits, repeated names -------------------

/** A map given as entries, so that a name can repeat. */
class Entries {
  constructor(readonly entries: ReadonlyArray<readonly [string, unknown]>) {}
}

type Pick = (choices: number) => number;

function u(bytes: number, value: number): number[] {
  const out: number[] = [];
  for (let i = bytes - 1; i >= 0; i--) out.push(Math.floor(value / 2 ** (8 * i)) & 0xff);
  return out;
}

function looseString(text: string, pick: Pick): number[] {
  const bytes = [...Buffer.from(text, 'utf8')];
  const forms: number[][] = [];
  if (bytes.length < 32) forms.push([0xa0 + bytes.length]);
  if (bytes.length < 256) forms.push([0xd9, bytes.length]);
  if (bytes.length < 65536) forms.push([0xda, ...u(2, bytes.length)]);
  forms.push([0xdb, ...u(4, bytes.length)]);
  return [...(forms[pick(forms.length)] as number[]), ...bytes];
}

function looseInteger(value: number, pick: Pick): number[] {
  const forms: number[][] = [];
  if (value >= 0 && value < 128) forms.push([value]);
  if (value < 0 && value >= -32) forms.push([value + 256]);
  if (value >= 0 && value < 256) forms.push([0xcc, value]);
  if (value >= 0 && value < 65536) forms.push([0xcd, ...u(2, value)]);
  if (value >= 0 && value < 2 ** 32) forms.push([0xce, ...u(4, value)]);
  if (value >= 0) forms.push([0xcf, ...u(8, value)]);
  if (value >= -128 && value < 128) forms.push([0xd0, value & 0xff]);
  if (value >= -32768 && value < 32768) forms.push([0xd1, ...u(2, value & 0xffff)]);
  if (value >= -(2 ** 31) && value < 2 ** 31) forms.push([0xd2, ...u(4, value >>> 0)]);
  const float = Buffer.alloc(8);
  float.writeDoubleBE(value);
  forms.push([0xcb, ...float]);
  return forms[pick(forms.length)] as number[];
}

function looseHeader(count: number, fix: number, form16: number, pick: Pick): number[] {
  const forms: number[][] = [];
  if (count < 16) forms.push([fix + count]);
  if (count < 65536) forms.push([form16, ...u(2, count)]);
  forms.push([form16 + 1, ...u(4, count)]);
  return forms[pick(forms.length)] as number[];
}

function loose(value: unknown, pick: Pick): number[] {
  if (value === null || value === undefined) return [0xc0];
  if (value === false) return [0xc2];
  if (value === true) return [0xc3];
  if (typeof value === 'string') return looseString(value, pick);
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value)) return looseInteger(value, pick);
    const float = Buffer.alloc(8);
    float.writeDoubleBE(value);
    if (Math.fround(value) === value && pick(2) === 0) {
      const single = Buffer.alloc(4);
      single.writeFloatBE(value);
      return [0xca, ...single];
    }
    return [0xcb, ...float];
  }
  if (Buffer.isBuffer(value)) {
    const forms = [
      [0xc4, value.length],
      [0xc5, ...u(2, value.length)],
      [0xc6, ...u(4, value.length)],
    ];
    return [...(forms[value.length < 256 ? pick(3) : 1 + pick(2)] as number[]), ...value];
  }
  if (Array.isArray(value)) {
    const items = value.flatMap((item) => loose(item, pick));
    return [...looseHeader(value.length, 0x90, 0xdc, pick), ...items];
  }
  const entries = value instanceof Entries ? value.entries : Object.entries(value);
  const body = entries.flatMap(([name, item]) => [
    ...looseString(name, pick),
    ...loose(item, pick),
  ]);
  return [...looseHeader(entries.length, 0x80, 0xde, pick), ...body];
}

function picker(seed: number): Pick {
  let state = seed >>> 0;
  return (choices) => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return (state >>> 8) % choices;
  };
}

// ---- arbitraries --------------------------------------------------------------------------

const ISO_MS_MAX = 253402300799999;

// Weights: most values are ones the writer takes, so that its output is compared often; the
// rest are the awkward ones it must decline or get right.
const text = fc.oneof(
  { weight: 20, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 60, maxLength: 80 }) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '',
      '"quoted"',
      'back\\slash',
      '\u0000\u0001\b\t\n\u000b\f\r\u001f\u007f',
      '\u2028\u2029',
      'caf\u00e9 \u20ac \u{1f600}',
      '\ufeffbom',
      '\ufeff' + 'x'.repeat(70),
      'x'.repeat(70) + '\ufeff',
      '\ud800 lone',
      'lone \udc00',
      '\u00e9'.repeat(40),
    ),
  },
);

const name = fc.oneof(
  { weight: 20, arbitrary: fc.stringMatching(/^[a-z_-][a-z0-9_-]{0,8}$/) },
  { weight: 1, arbitrary: fc.constantFrom('0', '1', '42', '01', '-1', '__proto__', 'CRC32C', '') },
  { weight: 1, arbitrary: text },
);

/** Names may repeat: the index codec keeps the last, the loose encoder writes each. */
const stringMap = fc
  .tuple(fc.array(fc.tuple(name, text), { maxLength: 4 }), fc.nat(9))
  .map(([pairs, again]) => {
    const first = pairs[0];
    return new Entries(again === 0 && first ? [...pairs, [first[0], 'again'] as const] : pairs);
  });

const number = fc.oneof(
  { weight: 4, arbitrary: fc.nat() },
  { weight: 2, arbitrary: fc.integer({ min: -(2 ** 31), max: 2 ** 31 }) },
  { weight: 2, arbitrary: fc.integer({ min: 2 ** 32 - 5, max: Number.MAX_SAFE_INTEGER }) },
  { weight: 1, arbitrary: fc.double() },
  {
    weight: 1,
    arbitrary: fc.constantFrom(0, -0, 1.5, 2 ** 53, 2 ** 64, -(2 ** 40), NaN, Infinity, -Infinity),
  },
);

const date = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: ISO_MS_MAX }) },
  { weight: 3, arbitrary: fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: -(2 ** 45), max: 2 ** 53 }) },
  { weight: 1, arbitrary: fc.double() },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      0,
      ISO_MS_MAX,
      ISO_MS_MAX + 1,
      -1,
      951782400000, // 2000-02-29
      4107542400000, // 2100-03-01
      68169600000, // 1972-02-29
      946684799999, // 1999-12-31T23:59:59.999
      8.64e15,
      8.64e15 + 1,
      1.5,
    ),
  },
);

/** Field values of the right type, as the engine writes them. */
const fields = {
  key: text,
  versionId: fc.oneof(fc.constant('null'), fc.stringMatching(/^[0-9a-f]{16}$/)),
  seq: fc.nat(),
  lastModified: date,
  deleteMarker: fc.boolean(),
  size: number,
  etag: text,
  contentType: text,
  metadata: stringMap,
  checksums: stringMap,
  chunks: fc.uint8Array({ maxLength: 80 }).map((bytes) => Buffer.from(bytes)),
  storedBytes: fc.nat(),
  compressed: fc.boolean(),
  tags: fc.array(fc.record({ key: text, value: text }), { maxLength: 3 }),
  retention: fc.record({
    mode: fc.constantFrom('GOVERNANCE', 'COMPLIANCE'),
    retainUntil: date,
  }),
  legalHold: fc.constantFrom('ON', 'OFF'),
} as const;

type FieldName = keyof typeof fields;
const fieldNames = Object.keys(fields) as FieldName[];

/** A JSON value in place of a field: mistyped fields must be declined or agree. */
const wrong = fc.jsonValue({ maxDepth: 2 });

interface FieldEntry {
  readonly field: string;
  readonly value: unknown;
}

/** One field: present with its kind of value (mostly), mistyped, or missing. */
const fieldEntry = (field: FieldName): fc.Arbitrary<FieldEntry | undefined> =>
  fc.oneof(
    {
      weight: 40,
      arbitrary: (fields[field] as fc.Arbitrary<unknown>).map((value) => ({ field, value })),
    },
    { weight: 1, arbitrary: wrong.map((value) => ({ field, value })) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );

/** Entries of a record, in a random order. */
const recordEntries: fc.Arbitrary<FieldEntry[]> = fc
  .tuple(
    fc.tuple<Array<FieldEntry | undefined>>(...fieldNames.map(fieldEntry)),
    fc.array(fc.nat(), { minLength: fieldNames.length, maxLength: fieldNames.length }),
  )
  .map(([entries, order]) =>
    entries
      .map((entry, index) => ({ entry, rank: order[index] ?? 0 }))
      .sort((a, b) => a.rank - b.rank)
      .flatMap(({ entry }) => (entry === undefined ? [] : [entry])),
  );

/** As a plain object for the index codec; a `__proto__` name stays an own property. */
function plain(entries: readonly FieldEntry[]): Record<string, unknown> {
  return ownProperties(
    entries.map(({ field, value }) => [
      field,
      value instanceof Entries ? ownProperties(value.entries) : value,
    ]),
  );
}

function ownProperties(pairs: ReadonlyArray<readonly [string, unknown]>): Record<string, unknown> {
  const object: Record<string, unknown> = {};
  for (const [key, value] of pairs) {
    const property = { value, enumerable: true, writable: true, configurable: true };
    Object.defineProperty(object, key, property);
  }
  return object;
}

/** As loose-encoder entries, which keep repeated names. */
function looseRecord(entries: readonly FieldEntry[]): Entries {
  return new Entries(entries.map(({ field, value }) => [field, value] as const));
}

// ---- properties ---------------------------------------------------------------------------

t.test('records from the index codec: accepted ones agree with the full decoder', async (t) => {
  accepted = 0;
  fc.assert(
    fc.property(recordEntries, (entries) => {
      const bytes = encodeValue(1, plain(entries));
      return agrees(bytes);
    }),
    { numRuns: 3000 },
  );
  t.ok(accepted > 1000, `${accepted} of 9000 written in place`);
});

t.test(
  'any header form, repeated names, extra or missing bytes: accepted ones agree',
  async (t) => {
    accepted = 0;
    fc.assert(
      fc.property(
        recordEntries,
        fc.integer(),
        fc.oneof(
          { weight: 4, arbitrary: fc.constant(null) },
          {
            weight: 1,
            arbitrary: fc.tuple(fc.constantFrom('key', 'size', 'metadata'), fc.anything()),
          },
        ),
        fc.constantFrom('exact', 'exact', 'exact', 'exact', 'trailing', 'cut', 'schema-2'),
        (entries, seed, repeat, ending) => {
          const all = repeat ? [...entries, { field: repeat[0], value: repeat[1] }] : entries;
          let body: number[];
          try {
            body = loose(looseRecord(all), picker(seed));
          } catch {
            return true; // a value fc.anything makes that the loose encoder does not know
          }
          let bytes = Buffer.from([1, ...body]);
          if (ending === 'trailing') bytes = Buffer.concat([bytes, Buffer.from([0xc0])]);
          if (ending === 'cut')
            bytes = bytes.subarray(0, Math.max(1, bytes.length - 1 - (seed & 7)));
          if (ending === 'schema-2') bytes[0] = 2;
          return agrees(bytes);
        },
      ),
      { numRuns: 3000 },
    );
    t.ok(accepted > 300, `${accepted} of 9000 written in place`);
  },
);

t.test('random bytes and mutated records: accepted ones agree', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => agrees(Buffer.from([1, ...bytes]))),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(recordEntries, fc.nat(), fc.nat(255), (entries, at, byte) => {
      const bytes = encodeValue(1, plain(entries));
      bytes[at % bytes.length] = byte;
      return agrees(bytes);
    }),
    { numRuns: 3000 },
  );
  t.pass();
});

/** Records as the engine writes them: valid names and strings, dates of this era. */
const lightwellRecord = fc
  .record(
    {
      key: fc.string({ minLength: 1, maxLength: 40 }).filter((key) => !key.startsWith('\ufeff')),
      versionId: fields.versionId,
      seq: fc.nat(),
      lastModified: fc.integer({ min: 1_600_000_000_000, max: 4_000_000_000_000 }),
      deleteMarker: fc.constant(true),
      size: fc.integer({ min: 0, max: 2 ** 50 }),
      etag: fc.stringMatching(/^"[0-9a-f]{32}(-[0-9]{1,5})?"$/),
      contentType: fc.constantFrom('application/octet-stream', 'text/plain; charset=utf-8'),
      metadata: fc.dictionary(
        fc.stringMatching(/^[a-z_-][a-z0-9_-]{0,10}$/),
        fc.stringMatching(/^[\x20-\x7e\u00a0-\u00ff]{0,20}$/),
        { maxKeys: 4 },
      ),
      checksums: fc.dictionary(
        fc.constantFrom('CRC32C', 'CRC32', 'CRC64NVME', 'SHA1', 'SHA256'),
        fc.base64String({ maxLength: 44 }),
      ),
      chunks: fields.chunks,
      storedBytes: fc.nat(),
      compressed: fc.boolean(),
      tags: fields.tags,
      retention: fc.record({
        mode: fc.constantFrom('GOVERNANCE', 'COMPLIANCE'),
        retainUntil: fc.integer({ min: 1_600_000_000_000, max: 4_000_000_000_000 }),
      }),
      legalHold: fields.legalHold,
    },
    { requiredKeys: ['key', 'versionId', 'seq', 'lastModified', 'size', 'etag', 'contentType'] },
  )
  .map((record) => ({ metadata: {}, checksums: {}, ...record }));

t.test('every record Lightwell writes is written in place, and agrees', async (t) => {
  fc.assert(
    fc.property(lightwellRecord, (record) => {
      const bytes = encodeValue(1, record);
      for (const versioning of versionings) {
        const fast = written(bytes, versioning);
        if (fast === undefined || fast !== reference(bytes, versioning)) return false;
      }
      return true;
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

t.test('examples', async (t) => {
  const base = {
    key: 'photos/2026/a.jpg',
    versionId: '00000000000000ff',
    seq: 255,
    lastModified: Date.UTC(2026, 10, 21, 4, 28, 14, 123),
    size: 12345,
    etag: '"0123456789abcdef0123456789abcdef"',
    contentType: 'image/jpeg',
    metadata: { camera: 'x100', 'taken-at': 'noon' },
    checksums: { CRC32C: 'AAAAAA==', SHA256: 'q83vEjRWeJA=' },
    chunks: Buffer.alloc(36, 7),
    storedBytes: 12000,
    compressed: true,
  };
  const cases: Array<[string, Record<string, unknown>]> = [
    ['object', base],
    ['null version', { ...base, versionId: 'null' }],
    ['delete marker', { ...base, deleteMarker: true, size: 0, chunks: Buffer.alloc(0) }],
    [
      'tags, retention, legal hold',
      {
        ...base,
        tags: [{ key: 'k', value: 'v' }],
        retention: { mode: 'COMPLIANCE', retainUntil: base.lastModified + 1 },
        legalHold: 'ON',
      },
    ],
    ['multipart etag, big size', { ...base, etag: '"abc-16"', size: 2 ** 40 }],
    ['epoch, empty maps', { ...base, lastModified: 0, metadata: {}, checksums: {} }],
    ['escapes', { ...base, key: 'a"b\\c\nd\u0001', contentType: 'text/x; q="1"' }],
    ['non-ASCII', { ...base, key: 'caf\u00e9/\u{1f600}', metadata: { n: '\u00e9t\u00e9' } }],
  ];
  for (const [label, record] of cases) {
    const bytes = encodeValue(1, record);
    for (const versioning of versionings) {
      t.equal(written(bytes, versioning), reference(bytes, versioning), `${label}, ${versioning}`);
    }
  }
  const declined: Array<[string, Record<string, unknown>]> = [
    ['digit metadata name', { ...base, metadata: { '1': 'a', b: 'c' } }],
    ['__proto__ name', { ...base, metadata: JSON.parse('{"__proto__":"x"}') as object }],
    ['leading BOM', { ...base, key: '\ufeffkey' }],
    ['lone surrogate', { ...base, key: 'a\ud800' }],
    ['date past 9999', { ...base, lastModified: ISO_MS_MAX + 1 }],
    ['fractional date', { ...base, lastModified: 1.5 }],
    ['missing metadata', { ...base, metadata: undefined }],
    ['size as text', { ...base, size: '12' }],
  ];
  for (const [label, record] of declined) {
    const bytes = encodeValue(1, record);
    t.equal(written(bytes, 'Enabled'), undefined, `declined: ${label}`);
  }
});

t.test('the page buffer grows as needed and lets a very large one go', async (t) => {
  const page = new JsonWriter(16);
  const text = 'x'.repeat(1000);
  for (let i = 0; i < 5000; i++) page.ascii(text);
  page.utf8('\u00e9');
  t.equal(page.length, 5_000_002, 'everything written');
  t.equal(page.view().toString('latin1', 4_999_990, 4_999_995), 'xxxxx');
  page.reset();
  t.equal(page.length, 0);
  t.equal(page.buffer.length, 16, 'a buffer past 4 MiB is replaced by a fresh small one');
  page.ascii('ok');
  page.reset();
  t.equal(page.buffer.length, 16, 'a small one is kept');
});
