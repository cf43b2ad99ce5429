// Goal: the node-to-node transport's authentication (docs/cluster.md §7) and the join secret:
// a signature verifies only for the same key, request and body, within the clock skew; a sealed
// cluster secret opens only with the same join secret and purpose; join secrets parse strictly.
// Method: the pure functions with fixed clocks; each tampering is tried on its own.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  signRequest,
  verifyRequest,
  sealWithJoinSecret,
  openWithJoinSecret,
  SKEW_MS_MAX,
} from '../../src/cluster/signing.js';
import { joinSecretBytes, JOIN_SECRET_PREFIX } from '../../src/cluster/node-state.js';

const key = randomBytes(32);
const now = 1_800_000_000_000;
const request = { method: 'POST', path: '/cluster/v1/hello', node: 'n1', body: Buffer.from('{}') };

function verify(overrides: Partial<Parameters<typeof verifyRequest>[1]> = {}, withKey = key) {
  const headers = signRequest(key, { ...request, nowMs: now });
  return verifyRequest(withKey, { ...request, headers, nowMs: now, ...overrides });
}

t.test('a signed request verifies and names its sender', async (t) => {
  t.equal(verify(), 'n1');
  t.equal(verify({ nowMs: now + SKEW_MS_MAX }), 'n1', 'at the skew limit');
});

t.test('every tampering is refused with 401', async (t) => {
  const headers = signRequest(key, { ...request, nowMs: now });
  const cases: Array<[string, () => unknown]> = [
    ['another key', () => verify({}, randomBytes(32))],
    ['another path', () => verify({ path: '/cluster/v1/join' })],
    ['another body', () => verify({ body: Buffer.from('{"a":1}') })],
    ['too late', () => verify({ nowMs: now + SKEW_MS_MAX + 1 })],
    ['another sender', () => verify({ headers: { ...headers, 'x-lightwell-node': 'n2' } })],
    ['no signature', () => verify({ headers: {} })],
    ['a bad time', () => verify({ headers: { ...headers, 'x-lightwell-time': 'soon' } })],
  ];
  for (const [name, attempt] of cases) t.throws(attempt, { code: 'unauthorized' }, name);
});

t.test('a sealed secret opens only with its join secret and purpose', async (t) => {
  const join = randomBytes(32);
  const secret = randomBytes(32);
  const sealed = sealWithJoinSecret(join, secret, 'cluster-secret:c1:n2');
  t.same(openWithJoinSecret(join, sealed, 'cluster-secret:c1:n2'), secret);
  t.throws(() => openWithJoinSecret(randomBytes(32), sealed, 'cluster-secret:c1:n2'), {
    code: 'unauthorized',
  });
  t.throws(() => openWithJoinSecret(join, sealed, 'cluster-secret:c1:n3'), {
    code: 'unauthorized',
  });
  t.throws(() => openWithJoinSecret(join, 'AAAA', 'x'), { code: 'bad_request' });
});

t.test('join secrets parse strictly', async (t) => {
  const bytes = randomBytes(32);
  t.same(joinSecretBytes(JOIN_SECRET_PREFIX + bytes.toString('base64url')), bytes);
  for (const bad of [
    '',
    'lwjoin_',
    'lwjoin_abc',
    bytes.toString('base64url'),
    'lwjoin_' + 'A'.repeat(44),
  ])
    t.throws(() => joinSecretBytes(bad), { code: 'bad_request' }, JSON.stringify(bad));
});
