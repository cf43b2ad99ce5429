// Goal: a listing's continuation token round-trips its position and is refused, with 400,
// whenever it was edited or is presented to a listing other than the one that issued it.
import t from 'tap';
import { ListTokens, type ListBinding } from '../../src/service/list-token.js';
import { isLightwellError } from '../../src/util/errors.js';

const tokens = new ListTokens(Buffer.alloc(32, 1));
const binding: ListBinding = { bucketId: 7, prefix: 'logs/', delimiter: '/' };

function refusal(run: () => unknown): number | undefined {
  try {
    run();
  } catch (error) {
    if (isLightwellError(error)) return error.status;
    throw error;
  }
  return undefined;
}

t.test('positions round-trip, keys and prefixes kept apart', async (t) => {
  for (const position of [
    { kind: 'key', value: 'logs/2026/' },
    { kind: 'prefix', value: 'logs/2026/' },
    { kind: 'key', value: '' },
    { kind: 'key', value: 'é/\u{1F600}'.repeat(100) },
  ] as const) {
    const token = tokens.encode(binding, position);
    t.match(token, /^[A-Za-z0-9_-]+$/, 'URL-safe without escaping');
    t.same(tokens.decode(binding, token), position);
  }
  t.not(
    tokens.encode(binding, { kind: 'key', value: 'x' }),
    tokens.encode(binding, { kind: 'prefix', value: 'x' }),
  );
});

t.test('another bucket, prefix or delimiter, or another key, refuses the token', async (t) => {
  const token = tokens.encode(binding, { kind: 'key', value: 'logs/a' });
  const others: ListBinding[] = [
    { ...binding, bucketId: 8 },
    { ...binding, prefix: 'logs' },
    { ...binding, prefix: '' },
    { ...binding, delimiter: '' },
    // The boundary between prefix and delimiter is part of what is signed.
    { ...binding, prefix: 'logs', delimiter: '//' },
  ];
  for (const other of others)
    t.equal(
      refusal(() => tokens.decode(other, token)),
      400,
    );
  const otherKey = new ListTokens(Buffer.alloc(32, 2));
  t.equal(
    refusal(() => otherKey.decode(binding, token)),
    400,
    'another data directory',
  );
});

t.test('every edited byte, and malformed text, is refused', async (t) => {
  const token = tokens.encode(binding, { kind: 'prefix', value: 'logs/a/' });
  const bytes = Buffer.from(token, 'base64url');
  for (let i = 0; i < bytes.length; i++) {
    const edited = Buffer.from(bytes);
    edited[i] = (edited[i] as number) ^ 0x20;
    t.equal(
      refusal(() => tokens.decode(binding, edited.toString('base64url'))),
      400,
      `byte ${i}`,
    );
  }
  for (const text of [
    '',
    'not base64!',
    bytes.subarray(0, bytes.length - 1).toString('base64url'),
    Buffer.from('plogs/a/').toString('base64url'),
    'A'.repeat(5000),
  ]) {
    t.equal(
      refusal(() => tokens.decode(binding, text)),
      400,
      text.slice(0, 20),
    );
  }
});
