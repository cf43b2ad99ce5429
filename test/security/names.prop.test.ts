// Goal: whatever they are given, the validators either accept or throw bad_request, and what
// they accept obeys the rules (checked against independent, simpler formulations).
// Method: fast-check with arbitrary strings (including lone surrogates) and arbitrary values.
// The seed is printed and FC_SEED replays it.
import t from 'tap';
import fc from 'fast-check';
import { errorCode } from '../../src/util/errors.js';
import {
  validateBucketName,
  validateObjectKey,
  validateTenantId,
  validateUserMetadata,
} from '../../src/security/names.js';

const seed = Number(process.env['FC_SEED'] ?? Date.now() % 2 ** 31);
t.comment(`fast-check seed ${seed} (replay with FC_SEED=${seed})`);

/** 'ok' when `run` returns, 'bad_request' when it throws that, otherwise a failure. */
function outcome(run: () => unknown): 'ok' | 'bad_request' {
  try {
    run();
    return 'ok';
  } catch (error) {
    if (errorCode(error) === 'bad_request') return 'bad_request';
    throw error;
  }
}

// Single UTF-16 code units, lone surrogates included.
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
const anyText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.string({ unit: 'grapheme-ascii', maxLength: 80 }),
  fc.stringMatching(/^[a-z0-9.-]{0,70}$/),
  fc.string({ unit: codeUnit, maxLength: 40 }),
);

t.test('bucket names: accepted names follow the S3 rules', async (t) => {
  fc.assert(
    fc.property(fc.oneof(anyText, fc.anything()), (name) => {
      if (outcome(() => validateBucketName(name)) === 'bad_request') return true;
      const text = name as string;
      return (
        /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(text) &&
        !text.includes('..') &&
        !/^\d+\.\d+\.\d+\.\d+$/.test(text)
      );
    }),
    { seed, numRuns: 3000 },
  );
  t.pass('only bad_request');
});

t.test('object keys: accepted keys are well-formed, NUL-free and within 1024 bytes', async (t) => {
  const longText = fc.string({ minLength: 300, maxLength: 1100 });
  fc.assert(
    fc.property(fc.oneof(anyText, fc.anything(), longText), (key) => {
      let bytes = -1;
      if (outcome(() => (bytes = validateObjectKey(key))) === 'bad_request') return true;
      const text = key as string;
      const roundTrips = Buffer.from(text, 'utf8').toString('utf8') === text;
      const counted = bytes === Buffer.byteLength(text) && bytes >= 1 && bytes <= 1024;
      return roundTrips && !text.includes('\0') && counted;
    }),
    { seed, numRuns: 3000 },
  );
  t.pass('only bad_request');
});

t.test('tenant ids: accepted ids match the DECISIONS rule', async (t) => {
  fc.assert(
    fc.property(fc.oneof(anyText, fc.anything()), (id) => {
      if (outcome(() => validateTenantId(id)) === 'bad_request') return true;
      return /^[a-z0-9-]{3,63}$/.test(id as string);
    }),
    { seed, numRuns: 2000 },
  );
  t.pass('only bad_request');
});

t.test('metadata: only bad_request, and accepted totals stay within 2 KiB', async (t) => {
  const map = fc.dictionary(anyText, fc.oneof(anyText, fc.anything()), { maxKeys: 5 });
  fc.assert(
    fc.property(fc.oneof(map, fc.anything()), (value) => {
      let bytes = -1;
      if (outcome(() => (bytes = validateUserMetadata(value))) === 'bad_request') return true;
      return bytes >= 0 && bytes <= 2048;
    }),
    { seed, numRuns: 2000 },
  );
  t.pass('only bad_request');
});
