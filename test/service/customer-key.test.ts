// Goal: SSE-C's key handling and cipher (service/customer-key.ts): a key is checked against its
// MD5, a sealed record verifies only its own key, the key never shows in JSON or inspection,
// the CTR keystream applied at any offset (and across a multipart version's parts, each under
// its own salt) equals the keystream applied in one pass and is its own inverse, a read without
// the key is a 400, with another key a 403, and a key for a plain version a 400.
// Method: the module's functions against node:crypto's AES-256-CTR run over whole buffers.
import t from 'tap';
import { createCipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import {
  CustomerCipher,
  CustomerKey,
  checkCustomerKeyTransport,
  requireCustomerKeyFor,
} from '../../src/service/customer-key.js';
import { isLightwellError } from '../../src/util/errors.js';

function fieldsOf(key: Buffer): { algorithm: string; key: string; keyMd5: string } {
  return {
    algorithm: 'AES256',
    key: key.toString('base64'),
    keyMd5: createHash('md5').update(key).digest('base64'),
  };
}

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return isLightwellError(error) ? error.code : 'not lightwell';
  }
  return 'none';
}

const rawA = randomBytes(32);
const keyA = CustomerKey.parse(fieldsOf(rawA), 'object') as CustomerKey;
const keyB = CustomerKey.parse(fieldsOf(randomBytes(32)), 'object') as CustomerKey;

/** AES-256-CTR over all of `plain` from counter 0 under the data key of `salt`. */
function wholeCtr(raw: Buffer, salt: Buffer, plain: Buffer): Buffer {
  const key = Buffer.from(hkdfSync('sha256', raw, salt, 'lightwell sse-c data v1', 32));
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  return Buffer.concat([cipher.update(plain), cipher.final()]);
}

t.test('parsing', async (t) => {
  t.equal(CustomerKey.parse({}, 'object'), undefined, 'no fields: no key');
  t.equal(keyA.keyMd5, fieldsOf(rawA).keyMd5);
  const bad = [
    { ...fieldsOf(rawA), keyMd5: fieldsOf(randomBytes(32)).keyMd5 },
    { ...fieldsOf(rawA), algorithm: 'AES128' },
    { algorithm: 'AES256', key: fieldsOf(rawA).key },
    fieldsOf(randomBytes(16)),
  ];
  for (const fields of bad)
    t.equal(
      codeOf(() => CustomerKey.parse(fields, 'object')),
      'bad_request',
    );
});

t.test('the key never shows', async (t) => {
  const text = JSON.stringify({ keyA }) + inspect(keyA) + String(Object.keys(keyA));
  t.notOk(text.includes(rawA.toString('base64')), 'not in base64');
  t.notOk(text.includes(rawA.toString('hex')), 'not in hex');
  t.ok(text.includes(keyA.keyMd5), 'its MD5 does');
});

t.test('a sealed record verifies its own key only', async (t) => {
  const record = keyA.seal();
  t.equal(record.salt.length, 16);
  t.equal(record.verifier.length, 32);
  t.notOk(record.verifier.includes(rawA), 'the verifier is not the key');
  t.ok(keyA.matches(record));
  t.notOk(keyB.matches(record));
  t.not(keyA.seal().salt.toString('hex'), record.salt.toString('hex'), 'a new salt each time');
  const version = { sseCustomer: record };
  t.equal(requireCustomerKeyFor(version, keyA), keyA);
  t.equal(
    codeOf(() => requireCustomerKeyFor(version, undefined)),
    'bad_request',
    'no key: 400',
  );
  t.equal(
    codeOf(() => requireCustomerKeyFor(version, keyB)),
    'forbidden',
    'another key: 403',
  );
  t.equal(
    codeOf(() => requireCustomerKeyFor(version, keyB, 'upload')),
    'bad_request',
    "a part under another key than its upload's: 400",
  );
  t.equal(
    codeOf(() => requireCustomerKeyFor({}, keyA)),
    'bad_request',
    'a key for plain: 400',
  );
  t.equal(requireCustomerKeyFor({}, undefined), undefined);
});

t.test('the keystream at any offset is the whole stream', async (t) => {
  const plain = randomBytes(1000);
  const record = keyA.seal();
  const cipher = CustomerCipher.forVersion({ sseCustomer: record, size: plain.length }, keyA);
  const whole = wholeCtr(rawA, record.salt, plain);
  t.same(cipher.apply(plain, 0), whole);
  for (const [start, end] of [
    [0, 1],
    [15, 17],
    [16, 32],
    [333, 999],
    [999, 1000],
  ] as const)
    t.same(cipher.apply(plain.subarray(start, end), start), whole.subarray(start, end), `${start}`);
  t.same(cipher.apply(whole, 0), plain, 'its own inverse');
  t.notSame(
    CustomerCipher.forVersion({ sseCustomer: record, size: 1000 }, keyB).apply(whole, 0),
    plain,
  );
});

t.test('a multipart version: a keystream per part', async (t) => {
  const sizes = [40, 7, 33];
  const plain = randomBytes(80);
  const salts = sizes.map(() => randomBytes(16));
  const record = { ...keyA.seal(), partSalts: Buffer.concat(salts) };
  const cipher = CustomerCipher.forVersion(
    { sseCustomer: record, size: 80, partSizes: sizes },
    keyA,
  );
  const expected = Buffer.concat([
    wholeCtr(rawA, salts[0] as Buffer, plain.subarray(0, 40)),
    wholeCtr(rawA, salts[1] as Buffer, plain.subarray(40, 47)),
    wholeCtr(rawA, salts[2] as Buffer, plain.subarray(47, 80)),
  ]);
  t.same(cipher.apply(plain, 0), expected, 'across every part at once');
  t.same(cipher.apply(plain.subarray(30, 60), 30), expected.subarray(30, 60), 'a range over parts');
  const part = CustomerCipher.forSalt(keyA, salts[1] as Buffer, 7);
  t.same(part.apply(plain.subarray(40, 47), 0), expected.subarray(40, 47), 'a part as uploaded');
});

t.test('over plain HTTP only from loopback or the trusted proxy', async (t) => {
  const at = (remoteAddress: string, tls = false, trustedProxy = '') =>
    codeOf(() => checkCustomerKeyTransport({ tls, remoteAddress, trustedProxy }));
  t.equal(at('127.0.0.1'), 'none');
  t.equal(at('::1'), 'none');
  t.equal(at('10.0.0.5'), 'bad_request');
  t.equal(at('10.0.0.5', true), 'none');
  t.equal(at('10.0.0.5', false, '10.0.0.5'), 'none');
});
