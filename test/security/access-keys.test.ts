// Goal: generated credentials have the documented shapes, are unique and use the whole
// alphabet; admin tokens are stored as the SHA-256 of the full token; constantTimeEqual is a
// correct equality over strings and buffers of any length.
// Method: generate many values and check shape, uniqueness and symbol coverage; compare hashes
// with a known SHA-256 vector.
import t from 'tap';
import { createHash } from 'node:crypto';
import {
  ACCESS_KEY_ID_CHARS,
  ACCESS_KEY_ID_PATTERN,
  ADMIN_TOKEN_ID_PATTERN,
  ADMIN_TOKEN_PATTERN,
  SECRET_KEY_PATTERN,
  constantTimeEqual,
  hashAdminToken,
  newAccessKeyId,
  newAdminToken,
  newSecretKey,
} from '../../src/security/access-keys.js';

t.test('access key ids: LW + 18 base32 characters, unique, every symbol used', async (t) => {
  const ids = new Set<string>();
  const symbols = new Set<string>();
  for (let i = 0; i < 2000; i += 1) {
    const id = newAccessKeyId();
    t.equal(id.length, 20);
    ids.add(id);
    for (const c of id.slice(2)) symbols.add(c);
  }
  t.equal(ACCESS_KEY_ID_CHARS, 20);
  t.ok([...ids].every((id) => /^LW[A-Z2-7]{18}$/.test(id) && ACCESS_KEY_ID_PATTERN.test(id)));
  t.equal(ids.size, 2000, 'no repeats');
  t.equal(symbols.size, 32, 'all 32 base32 symbols appear');
});

t.test('secret keys: 40 base64url characters of 30 random bytes', async (t) => {
  const secrets = new Set<string>();
  for (let i = 0; i < 1000; i += 1) {
    const secret = newSecretKey();
    t.ok(SECRET_KEY_PATTERN.test(secret));
    t.equal(Buffer.from(secret, 'base64url').length, 30);
    secrets.add(secret);
  }
  t.equal(secrets.size, 1000);
});

t.test('admin tokens: token, id and stored hash', async (t) => {
  const a = newAdminToken();
  const b = newAdminToken();
  t.match(a.token, /^lwadm_[A-Za-z0-9_-]{43}$/);
  t.ok(ADMIN_TOKEN_PATTERN.test(a.token));
  t.equal(Buffer.from(a.token.slice(6), 'base64url').length, 32);
  t.match(a.tokenId, /^adm_[0-9a-f]{16}$/);
  t.ok(ADMIN_TOKEN_ID_PATTERN.test(a.tokenId));
  t.equal(a.hash, createHash('sha256').update(a.token).digest('hex'), 'hash of the full token');
  t.equal(a.hash, hashAdminToken(a.token));
  t.not(a.token, b.token);
  t.not(a.tokenId, b.tokenId);
  t.notOk(a.hash.includes(a.token.slice(6)), 'the hash does not contain the secret');
});

t.test('hashAdminToken is SHA-256 hex', async (t) => {
  t.equal(
    hashAdminToken('abc'),
    'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
  );
  t.equal(hashAdminToken('').length, 64);
});

t.test('constantTimeEqual', async (t) => {
  t.ok(constantTimeEqual('secret', 'secret'));
  t.notOk(constantTimeEqual('secret', 'secreT'));
  t.notOk(constantTimeEqual('secret', 'secret!'), 'different lengths');
  t.notOk(constantTimeEqual('', 'x'));
  t.ok(constantTimeEqual('', ''));
  t.ok(constantTimeEqual(Buffer.from('é'), 'é'), 'strings compare by UTF-8 bytes');
  t.ok(constantTimeEqual(Buffer.from([1, 2, 3]), Buffer.from([1, 2, 3])));
  t.notOk(constantTimeEqual(Buffer.from([1, 2, 3]), Buffer.from([1, 2, 4])));
  t.notOk(constantTimeEqual('a'.repeat(10_000), 'a'.repeat(10_001)));
});
