// Goal: each validator accepts what the rules allow and refuses every broken rule with
// bad_request and a message naming that rule, without echoing huge input.
// Method: tables of accepted and refused values, one row per rule and boundary.
import t from 'tap';
import {
  NO_CONTROL_CHARS_PATTERN,
  OBJECT_KEY_BYTES_MAX,
  USER_METADATA_BYTES_MAX,
  quoteForMessage,
  refuseControlChars,
  validateAccountId,
  validateBucketName,
  validateObjectKey,
  validateTenantId,
  validateUserMetadata,
} from '../../src/security/names.js';

const badRequest = (message: RegExp) => ({ code: 'bad_request', status: 400, message });

t.test('bucket names: accepted', async (t) => {
  const names = ['abc', 'my-bucket', 'my.bucket.name', 'a1b', '1-2', 'a'.repeat(63), '192.168.5'];
  for (const name of [...names, 'xn-a', 'admin', 'apis']) {
    t.doesNotThrow(() => validateBucketName(name), name);
  }
});

t.test('bucket names: each rule refused with its message', async (t) => {
  const cases: [unknown, RegExp][] = [
    [42, /must be a string/],
    ['ab', /3 to 63 characters/],
    ['', /3 to 63 characters/],
    ['a'.repeat(64), /3 to 63 characters/],
    ['My-Bucket', /lowercase letters, digits, dots and hyphens/],
    ['my_bucket', /lowercase letters, digits, dots and hyphens/],
    ['my bucket', /lowercase letters, digits, dots and hyphens/],
    ['bück', /lowercase letters, digits, dots and hyphens/],
    ['-bucket', /begin and end with a letter or digit/],
    ['bucket-', /begin and end with a letter or digit/],
    ['.bucket', /begin and end with a letter or digit/],
    ['bucket.', /begin and end with a letter or digit/],
    ['my..bucket', /two adjacent dots/],
    ['foo-.bar', /hyphen beside a dot/],
    ['foo.-bar', /hyphen beside a dot/],
    ['192.168.5.4', /IP address/],
    ['api', /reserved: its path is another API's/],
    ['xn--bucket', /reserved prefix xn--/],
    ['sthree-bucket', /reserved prefix sthree-/],
    ['amzn-s3-demo-bucket', /reserved prefix amzn-s3-demo-/],
    ['bucket-s3alias', /reserved suffix -s3alias/],
    ['bucket--ol-s3', /reserved suffix --ol-s3/],
    ['bucket.mrap', /reserved suffix .mrap/],
    ['bucket--x-s3', /reserved suffix --x-s3/],
    ['bucket--table-s3', /reserved suffix --table-s3/],
  ];
  for (const [name, message] of cases) {
    t.throws(() => validateBucketName(name), badRequest(message), String(name));
  }
});

t.test('object keys: accepted, returning UTF-8 bytes', async (t) => {
  t.equal(validateObjectKey('a'), 1);
  t.equal(validateObjectKey('photos/2024/é.jpg'), 18);
  t.equal(validateObjectKey('😀'), 4, 'a surrogate pair is one 4-byte character');
  t.equal(validateObjectKey('../../etc/passwd'), 16, 'keys are opaque, not paths');
  t.equal(validateObjectKey('a'.repeat(OBJECT_KEY_BYTES_MAX)), 1024);
  t.equal(validateObjectKey('é'.repeat(512)), 1024);
  t.equal(validateObjectKey('', { allowEmpty: true }), 0, 'an empty prefix');
  t.equal(validateObjectKey('tab\tnew\nline'), 12, 'other controls are allowed, as in S3');
});

t.test('object keys: refused', async (t) => {
  const cases: [unknown, RegExp][] = [
    [undefined, /object key must be a string/],
    [Buffer.from('a'), /object key must be a string/],
    ['', /must not be empty/],
    ['a\u0000b', /U\+0000/],
    ['a\uD800', /lone surrogate/],
    ['\uDC00a', /lone surrogate/],
    ['\uDC00\uD800', /lone surrogate/],
    ['a'.repeat(1025), /1025 bytes of UTF-8; the limit is 1024/],
    ['é'.repeat(513), /1026 bytes/],
  ];
  for (const [key, message] of cases) {
    t.throws(
      () => validateObjectKey(key),
      badRequest(message),
      (JSON.stringify(key) as string | undefined)?.slice(0, 20) ?? 'undefined',
    );
  }
  t.throws(
    () => validateObjectKey('\uD800', { allowEmpty: true }),
    badRequest(/key prefix must be valid/),
  );
});

t.test('tenant and account ids', async (t) => {
  for (const id of ['abc', 'acme-corp', '123', '-a-', 'a'.repeat(63)]) {
    t.doesNotThrow(() => validateTenantId(id), id);
    t.doesNotThrow(() => validateAccountId(id), id);
  }
  for (const id of ['a', 'svc_backup', 'Ingest.Pipeline', 'ops@acme', 'a'.repeat(64)])
    t.doesNotThrow(() => validateAccountId(id), `account id ${id}`);
  const accountCases: [unknown, RegExp][] = [
    [null, /must be a string/],
    ['', /1 to 64 characters/],
    ['a'.repeat(65), /1 to 64 characters/],
    ['has space', /only letters, digits/],
    ['a/b', /only letters, digits/],
    ['a\u0000b', /only letters, digits/],
    ['ünïcode', /only letters, digits/],
  ];
  for (const [id, message] of accountCases)
    t.throws(() => validateAccountId(id), badRequest(new RegExp(`account id.*${message.source}`)));
  const cases: [unknown, RegExp][] = [
    [null, /must be a string/],
    ['ab', /3 to 63 characters/],
    ['a'.repeat(64), /3 to 63 characters/],
    ['Acme', /lowercase letters, digits and hyphens/],
    ['acme_corp', /lowercase letters, digits and hyphens/],
    ['acme.corp', /lowercase letters, digits and hyphens/],
  ];
  for (const [id, message] of cases)
    t.throws(() => validateTenantId(id), badRequest(new RegExp(`tenant id.*${message.source}`)));
});

t.test('user metadata: accepted', async (t) => {
  t.equal(validateUserMetadata({}), 0);
  t.equal(validateUserMetadata({ 'camera-model': 'X100 V', owner_id: '42' }), 28);
  t.equal(validateUserMetadata({ a: '' }), 1, 'empty values are allowed');
  t.equal(validateUserMetadata({ name: 'caf%C3%A9' }), 13, 'percent-encoded');
  t.equal(validateUserMetadata({ v: 'a\tb c' }), 6, 'inner tab and space');
  t.equal(validateUserMetadata(new Map([['k', 'v']])), 2, 'a Map');
  const name = 'n';
  const exact = { [name]: 'x'.repeat(USER_METADATA_BYTES_MAX - 1) };
  t.equal(validateUserMetadata(exact), 2048, 'exactly 2 KiB');
});

t.test('user metadata: refused', async (t) => {
  const cases: [unknown, RegExp][] = [
    [null, /must be an object/],
    ['a=b', /must be an object/],
    [['a'], /must be an object/],
    [{ '': 'x' }, /names must not be empty/],
    [new Map([[1, 'x']]), /names must be strings/],
    [{ Owner: 'x' }, /may contain only lowercase letters/],
    [{ 'a b': 'x' }, /may contain only lowercase letters/],
    [{ 'a:b': 'x' }, /may contain only lowercase letters/],
    [{ a: 5 }, /value of "a" must be a string/],
    [{ a: 'x\ny' }, /printable ASCII/],
    [{ a: 'x\u0000' }, /printable ASCII/],
    [{ a: 'x\u007f' }, /printable ASCII/],
    [{ a: ' x' }, /with spaces or tabs only inside it/],
    [{ a: 'x\t' }, /with spaces or tabs only inside it/],
    [{ a: ' ' }, /printable ASCII/],
    [{ a: 'snow ☃' }, /printable ASCII/],
    [{ a: 'café' }, /printable ASCII/],
    [{ a: 'x\u00a0y' }, /printable ASCII/],
    [{ n: 'x'.repeat(USER_METADATA_BYTES_MAX) }, /over 2048 bytes/],
    [{ ['n'.repeat(3000)]: 'x' }, /over 2048 bytes/],
    [{ a: 'x'.repeat(1500), b: 'y'.repeat(1500) }, /over 2048 bytes/],
  ];
  for (const [map, message] of cases) {
    t.throws(() => validateUserMetadata(map), badRequest(message));
  }
});

t.test('text people read refuses controls and line separators, naming the field', async (t) => {
  // NBSP, the characters around the refused ranges, and other Unicode pass (the cases are named
  // by index: a U+2028 in a test's name would break its TAP line).
  const accepted = ['', 'Zürich – “Ops” 🚀', ' spaces ', '~\u00a0\u2027\u202a\u00ff'];
  accepted.forEach((text, index) => {
    t.doesNotThrow(() => refuseControlChars(text, 'name'), `accepted[${index}]`);
  });
  const cases: [string, string][] = [
    ['a\u0000b', 'U+0000'],
    ['tab\t', 'U+0009'],
    ['line\r\nforged', 'U+000D'],
    ['\u001f', 'U+001F'],
    ['del\u007f', 'U+007F'],
    ['c1\u0080', 'U+0080'],
    ['next line\u0085', 'U+0085'],
    ['\u009f', 'U+009F'],
    ['line\u2028separator', 'U+2028'],
    ['paragraph\u2029', 'U+2029'],
  ];
  for (const [text, found] of cases) {
    t.throws(
      () => refuseControlChars(text, 'reason'),
      {
        code: 'bad_request',
        message:
          'reason must not contain control characters or line separators (U+0000 to U+001F, ' +
          `U+007F to U+009F, U+2028, U+2029); found ${found}`,
      },
      found,
    );
    t.notOk(new RegExp(NO_CONTROL_CHARS_PATTERN, 'u').test(text), `the pattern refuses ${found}`);
  }
  accepted.forEach((text, index) => {
    t.ok(new RegExp(NO_CONTROL_CHARS_PATTERN, 'u').test(text), `the pattern takes [${index}]`);
  });
});

t.test('messages quote at most 64 characters of the input', async (t) => {
  t.equal(quoteForMessage('abc'), '"abc"');
  t.equal(quoteForMessage('x'.repeat(100)), `"${'x'.repeat(64)}"…`);
  try {
    validateBucketName(`A${'b'.repeat(10_000)}`);
    t.fail('should throw');
  } catch (error) {
    t.ok((error as Error).message.length < 200);
  }
  try {
    validateUserMetadata({ ['X'.repeat(1000)]: 'v' });
    t.fail('should throw');
  } catch (error) {
    t.ok((error as Error).message.length < 200);
  }
});
