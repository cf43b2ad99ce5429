// Goal: the FORMAT marker codec writes the documented bytes and rejects every malformed,
// corrupt or too-new marker with the right error code.
// Method: encode a known marker and check bytes and round trip; then tamper with single fields
// (re-computing the checksum where the test is about the field, not the checksum) and check the
// error code of each case; finally check that the encoder asserts on invalid input.

import t from 'tap';
import {
  FORMAT_VERSION,
  MARKER_SIZE,
  OFFSET_MARKER_CHECKSUM,
  OFFSET_MARKER_CREATED_AT_MS,
  OFFSET_MARKER_CREATED_BY,
  OFFSET_MARKER_FLAGS,
  OFFSET_MARKER_FORMAT_VERSION,
  OFFSET_MARKER_RESERVED10,
  OFFSET_MARKER_RESERVED48,
  decodeMarker,
  encodeMarker,
} from '../../src/format/marker.js';
import { reseal } from './format-testing.js';

const fields = { createdBy: 'lightwell-0.1.0', createdAtMs: 1767225600000 };

function tampered(change: (target: Buffer) => void): Buffer {
  const target = encodeMarker(fields);
  change(target);
  return reseal(target, OFFSET_MARKER_CHECKSUM);
}

t.test('round trip and bytes', async (t) => {
  const encoded = encodeMarker(fields);
  t.equal(encoded.length, MARKER_SIZE);
  t.equal(encoded.toString('latin1', 0, 8), 'LWFORMAT');
  t.equal(encoded.readUInt16LE(OFFSET_MARKER_FORMAT_VERSION), FORMAT_VERSION);
  t.same(decodeMarker(encoded), { formatVersion: 1, flags: 0, ...fields });
  const full = { createdBy: 'x'.repeat(16), createdAtMs: Number.MAX_SAFE_INTEGER };
  t.same(decodeMarker(encodeMarker(full)), { formatVersion: 1, flags: 0, ...full });
});

t.test('readers ignore reserved bytes', async (t) => {
  const marker = tampered((target) => {
    target.fill(0xff, OFFSET_MARKER_RESERVED10, OFFSET_MARKER_FLAGS);
    target.fill(0xff, OFFSET_MARKER_RESERVED48, OFFSET_MARKER_CHECKSUM);
  });
  t.same(decodeMarker(marker), { formatVersion: 1, flags: 0, ...fields });
});

t.test('malformed markers are format errors', async (t) => {
  const formatError = { code: 'format_error' };
  const good = encodeMarker(fields);
  t.throws(() => decodeMarker(Buffer.alloc(0)), formatError, 'empty');
  t.throws(() => decodeMarker(Buffer.alloc(64)), formatError, 'zeros');
  t.throws(() => decodeMarker(good.subarray(0, 8)), formatError, 'magic only');
  t.throws(() => decodeMarker(good.subarray(0, 63)), formatError, 'one byte short');
  t.throws(() => decodeMarker(Buffer.concat([good, Buffer.alloc(1)])), formatError, 'too long');
  const badMagic = Buffer.from(good);
  badMagic.write('LWFORMAX', 0, 'latin1');
  t.throws(() => decodeMarker(badMagic), formatError, 'bad magic');
  const badChecksum = Buffer.from(good);
  badChecksum.writeUInt32LE(good.readUInt32LE(OFFSET_MARKER_CHECKSUM) ^ 1, OFFSET_MARKER_CHECKSUM);
  t.throws(() => decodeMarker(badChecksum), formatError, 'checksum');
  const version0 = tampered((target) => target.writeUInt16LE(0, OFFSET_MARKER_FORMAT_VERSION));
  t.throws(() => decodeMarker(version0), formatError, 'version 0');
  const createdByControl = tampered((target) => target.writeUInt8(0x07, OFFSET_MARKER_CREATED_BY));
  t.throws(() => decodeMarker(createdByControl), formatError, 'control character in createdBy');
  const createdByEmpty = tampered((target) => target.fill(0, OFFSET_MARKER_CREATED_BY, 40));
  t.throws(() => decodeMarker(createdByEmpty), formatError, 'empty createdBy');
  // 'lightwell-0.1.0' with a NUL at index 5: the rest of the text now follows the padding.
  const afterPadding = tampered((target) => target.writeUInt8(0, OFFSET_MARKER_CREATED_BY + 5));
  t.throws(() => decodeMarker(afterPadding), formatError, 'text after NUL padding');
  const hugeTime = tampered((target) =>
    target.writeBigUInt64LE(2n ** 53n, OFFSET_MARKER_CREATED_AT_MS),
  );
  t.throws(() => decodeMarker(hugeTime), formatError, 'createdAtMs beyond 2^53 - 1');
});

t.test('newer markers are format_too_new', async (t) => {
  const tooNew = { code: 'format_too_new' };
  const version2 = tampered((target) => target.writeUInt16LE(2, OFFSET_MARKER_FORMAT_VERSION));
  t.throws(() => decodeMarker(version2), tooNew, 'version 2');
  // A newer version may lay its marker out differently: no checksum or size is demanded.
  const version2Long = Buffer.concat([version2.subarray(0, 10), Buffer.alloc(100, 0xee)]);
  t.throws(() => decodeMarker(version2Long), tooNew, 'version 2 of another size');
  for (const bit of [0n, 1n, 63n]) {
    const flagged = tampered((target) => target.writeBigUInt64LE(1n << bit, OFFSET_MARKER_FLAGS));
    t.throws(() => decodeMarker(flagged), tooNew, `unknown flag bit ${bit}`);
  }
});

t.test('the encoder asserts on invalid fields', async (t) => {
  const assertion = { code: 'ERR_ASSERTION' };
  t.throws(() => encodeMarker({ ...fields, createdBy: '' }), assertion, 'empty createdBy');
  t.throws(() => encodeMarker({ ...fields, createdBy: 'x'.repeat(17) }), assertion, 'long');
  t.throws(() => encodeMarker({ ...fields, createdBy: 'é' }), assertion, 'not ASCII');
  t.throws(() => encodeMarker({ ...fields, createdAtMs: -1 }), assertion, 'negative time');
  t.throws(() => encodeMarker({ ...fields, createdAtMs: 1.5 }), assertion, 'fractional time');
  t.throws(() => encodeMarker({ ...fields, createdAtMs: 2 ** 53 }), assertion, 'unsafe time');
});
