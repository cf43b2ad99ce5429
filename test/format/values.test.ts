// Goal: the index value codec writes plain, deterministic MessagePack behind a schema version
// byte, with the documented choices (undefined omitted, buffers copied, big integers exact),
// and rejects malformed values with FormatError.
// Method: compare exact bytes of small values with hand-assembled MessagePack; round trip the
// value kinds the index uses; decode malformed inputs and check the error code; check the
// encoder's assertions.

import t from 'tap';
import { VALUE_SCHEMA_VERSION, decodeValue, encodeValue } from '../../src/format/values.js';

t.test('exact bytes: plain MessagePack behind the schema version', async (t) => {
  t.equal(VALUE_SCHEMA_VERSION, 1);
  t.equal(encodeValue(1, {}).toString('hex'), '0180', 'empty fixmap');
  t.equal(encodeValue(1, { a: 1 }).toString('hex'), '0181a16101', 'fixmap, fixstr, fixint');
  t.equal(encodeValue(255, { a: 'b' }).toString('hex'), 'ff81a161a162');
  t.equal(encodeValue(1, { a: 0x80 }).toString('hex'), '0181a161cc80', 'uint8');
  t.equal(encodeValue(1, { a: -1 }).toString('hex'), '0181a161ff', 'negative fixint');
  t.equal(encodeValue(1, { a: 2 ** 32 }).toString('hex'), '0181a161cb41f0000000000000', 'float64');
  t.equal(encodeValue(1, { a: 0.5 }).toString('hex'), '0181a161cb3fe0000000000000', 'float64');
  t.equal(encodeValue(1, { a: null, b: true }).toString('hex'), '0182a161c0a162c3');
  t.equal(encodeValue(1, { a: Buffer.from([1, 2]) }).toString('hex'), '0181a161c4020102', 'bin8');
  t.equal(encodeValue(1, { a: [1, 'x'] }).toString('hex'), '0181a1619201a178', 'fixarray');
  const withUndefined = encodeValue(1, { a: undefined, b: 1 });
  t.equal(withUndefined.toString('hex'), '0181a16201', 'undefined omitted');
  const sixteenKeys = Object.fromEntries([...Array(16).keys()].map((i) => [`k${i}`, i]));
  t.equal(encodeValue(1, sixteenKeys).subarray(1, 4).toString('hex'), 'de0010', 'map16');
});

t.test('round trips', async (t) => {
  const value = {
    name: 'photos/2026/01/cat.jpg',
    size: 123456789012,
    maxSafe: Number.MAX_SAFE_INTEGER,
    negative: -42,
    ratio: 0.1,
    flags: [true, false, null],
    etag: Buffer.from('00112233445566778899aabbccddeeff', 'hex'),
    created: new Date(1767225600123),
    nested: { deeper: { deepest: 'ok' }, list: [{ a: 1 }, { b: [2, 3] }] },
    unicode: 'größe ✓ 🐈',
    empty: '',
  };
  const decoded = decodeValue(encodeValue(3, value));
  t.equal(decoded.schemaVersion, 3);
  t.same(decoded.value, value);
  t.ok(Buffer.isBuffer(decoded.value['etag']), 'binary decodes as a Buffer');
  t.ok(decoded.value['created'] instanceof Date, 'dates decode as Date');
  t.equal(Object.getPrototypeOf(decoded.value), Object.prototype, 'a plain object');
  const nullPrototype = Object.assign(Object.create(null) as object, { a: 1 });
  t.same(decodeValue(encodeValue(1, nullPrototype)).value, { a: 1 }, 'null prototype accepted');
});

t.test('decoded binary values are copies of the source', async (t) => {
  const encoded = encodeValue(1, { data: Buffer.from('abc') });
  const decoded = decodeValue(encoded).value['data'] as Buffer;
  encoded.fill(0);
  t.equal(decoded.toString(), 'abc');
});

t.test('64-bit integers from other encoders decode as numbers', async (t) => {
  const uint64 = Buffer.from('0181a161cf' + '001fffffffffffff', 'hex');
  t.same(decodeValue(uint64).value, { a: Number.MAX_SAFE_INTEGER });
  const int64 = Buffer.from('0181a161d3' + 'ffffffffffffffff', 'hex');
  t.same(decodeValue(int64).value, { a: -1 });
});

t.test('malformed values are format errors', async (t) => {
  const formatError = { code: 'format_error' };
  const cases: Array<[string, string]> = [
    ['empty', ''],
    ['version only', '01'],
    ['schema version 0', '0080'],
    ['truncated map', '0181a161'],
    ['truncated string', '0181a3616263'.slice(0, 8)],
    ['trailing bytes', '018000'],
    ['array at the top', '019101'],
    ['number at the top', '0101'],
    ['string at the top', '01a161'],
    ['nil at the top', '01c0'],
    ['reserved byte 0xc1', '01c1'],
    ['huge declared array', '0181a161dd7fffffff'],
  ];
  for (const [name, hex] of cases) {
    t.throws(() => decodeValue(Buffer.from(hex, 'hex')), formatError, name);
  }
});

t.test('the encoder asserts on invalid input', async (t) => {
  const assertion = { code: 'ERR_ASSERTION' };
  t.throws(() => encodeValue(0, {}), assertion, 'schema version 0');
  t.throws(() => encodeValue(256, {}), assertion, 'schema version 256');
  t.throws(() => encodeValue(1.5, {}), assertion, 'fractional schema version');
  t.throws(() => encodeValue(1, [1, 2]), assertion, 'array');
  t.throws(() => encodeValue(1, new Map([['a', 1]])), assertion, 'Map');
  t.throws(() => encodeValue(1, new Date(0)), assertion, 'Date');
});
