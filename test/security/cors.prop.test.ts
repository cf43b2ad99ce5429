// Goal: the CORS validator never throws anything but bad_request, whatever it is given; what it
// accepts it accepts again unchanged (parse is idempotent); and a single-wildcard pattern
// matches exactly the strings that start with its head and end with its tail.
// Method: fast-check over arbitrary JSON values, over mutations of a valid rule, and over
// random patterns and strings. The seed is printed and FC_SEED replays it.
import t from 'tap';
import fc from 'fast-check';
import { parseCorsConfiguration, wildcardMatches, CORS_METHODS } from '../../src/security/cors.js';
import { isLightwellError } from '../../src/util/errors.js';

const seed = Number(process.env['FC_SEED'] ?? Date.now() % 2 ** 31);
t.comment(`fast-check seed ${seed} (replay with FC_SEED=${seed})`);

function onlyBadRequest(value: unknown): boolean {
  try {
    const parsed = parseCorsConfiguration(value);
    return (
      JSON.stringify(parseCorsConfiguration(JSON.parse(JSON.stringify(parsed)))) ===
      JSON.stringify(parsed)
    );
  } catch (error) {
    return isLightwellError(error) && error.code === 'bad_request';
  }
}

const token = fc.string({
  minLength: 1,
  maxLength: 12,
  unit: fc.constantFrom(...'abcxyz019-*.:/'.split('')),
});
const rule = fc.record(
  {
    id: fc.string({ maxLength: 8 }),
    allowedOrigins: fc.array(token, { maxLength: 4 }),
    allowedMethods: fc.array(fc.constantFrom(...CORS_METHODS, 'PATCH', 'get'), { maxLength: 6 }),
    allowedHeaders: fc.array(token, { maxLength: 4 }),
    exposeHeaders: fc.array(token, { maxLength: 3 }),
    maxAgeSeconds: fc.oneof(fc.integer(), fc.double()),
  },
  { requiredKeys: [] },
);

t.test('arbitrary values: accepted idempotently or refused with bad_request', async (t) => {
  fc.assert(fc.property(fc.anything(), onlyBadRequest), { seed, numRuns: 1000 });
  fc.assert(
    fc.property(fc.array(rule, { maxLength: 4 }), (rules) => onlyBadRequest({ rules })),
    { seed, numRuns: 2000 },
  );
  t.pass('only bad_request');
});

t.test('a one-wildcard pattern is a head and a tail', async (t) => {
  const text = fc.string({ maxLength: 10, unit: fc.constantFrom(...'ab.:'.split('')) });
  fc.assert(
    fc.property(text, text, text, (head, tail, value) => {
      const expected =
        value.length >= head.length + tail.length && value.startsWith(head) && value.endsWith(tail);
      return (
        wildcardMatches(`${head}*${tail}`, value) === expected && wildcardMatches(value, value)
      );
    }),
    { seed, numRuns: 3000 },
  );
  t.pass('wildcard semantics');
});
