// Goal: the token bucket allows `burst` requests at once and `perSecond` sustained, answers
// refusals with a whole-second Retry-After, never holds more than maxKeys buckets, drops idle
// full buckets, keeps recently used ones, and refuses bad settings with bad_request.
// Method: a fixed, hand-advanced clock and exact expected answers.
import t from 'tap';
import { KEY_CHARS_MAX, RateLimiter } from '../../src/security/rate-limit.js';

t.test('burst, then refusal with Retry-After, then refill', async (t) => {
  const limiter = new RateLimiter({ perSecond: 10, burst: 20 });
  for (let i = 0; i < 20; i += 1) t.same(limiter.take('k', 1000), { ok: true });
  t.same(limiter.take('k', 1000), { ok: false, retryAfterSeconds: 1 });
  t.same(limiter.take('k', 1099), { ok: false, retryAfterSeconds: 1 }, '0.99 tokens');
  t.same(limiter.take('k', 1100), { ok: true }, 'one token after 100 ms');
  t.same(limiter.take('other', 1100), { ok: true }, 'keys are independent');
  t.same(limiter.take('k', 60_000), { ok: true });
  for (let i = 0; i < 19; i += 1) limiter.take('k', 60_000);
  t.same(limiter.take('k', 60_000), { ok: false, retryAfterSeconds: 1 }, 'refill caps at burst');
});

t.test('slow rates round Retry-After up to whole seconds', async (t) => {
  const limiter = new RateLimiter({ perSecond: 0.1, burst: 1 });
  t.same(limiter.take('k', 0), { ok: true });
  t.same(limiter.take('k', 0), { ok: false, retryAfterSeconds: 10 });
  t.same(limiter.take('k', 2500), { ok: false, retryAfterSeconds: 8 });
  t.same(limiter.take('k', 10_000), { ok: true });
});

t.test('a clock that steps back refills nothing', async (t) => {
  const limiter = new RateLimiter({ perSecond: 1, burst: 1 });
  t.same(limiter.take('k', 10_000), { ok: true });
  t.same(limiter.take('k', 5_000), { ok: false, retryAfterSeconds: 1 });
  t.same(limiter.take('k', 10_999), { ok: false, retryAfterSeconds: 1 });
  t.same(limiter.take('k', 11_000), { ok: true });
  t.throws(() => limiter.take('k', Number.NaN), { code: 'ERR_ASSERTION' });
});

t.test('memory is bounded by maxKeys, least recently used first', async (t) => {
  const limiter = new RateLimiter({ perSecond: 1, burst: 2, maxKeys: 3 });
  limiter.take('a', 0);
  limiter.take('a', 0);
  t.same(limiter.take('a', 0), { ok: false, retryAfterSeconds: 1 }, 'a is drained');
  limiter.take('b', 0);
  limiter.take('c', 0);
  limiter.take('a', 0); // a becomes the most recently used
  limiter.take('d', 0); // evicts b, the least recently used
  t.equal(limiter.size, 3);
  t.same(limiter.take('a', 0), { ok: false, retryAfterSeconds: 1 }, 'a kept its state');
  for (let i = 0; i < 1000; i += 1) limiter.take(`flood-${i}`, 0);
  t.equal(limiter.size, 3, 'never more than maxKeys');
});

t.test('idle full buckets are dropped as time passes', async (t) => {
  const limiter = new RateLimiter({ perSecond: 1, burst: 1 });
  for (let i = 0; i < 10; i += 1) limiter.take(`k${i}`, 0);
  t.equal(limiter.size, 10);
  limiter.take('fresh', 5_000);
  t.equal(limiter.size, 9, 'two refilled buckets dropped, one added');
  for (let i = 0; i < 10; i += 1) limiter.take('fresh', 10_000 + i * 1000);
  t.equal(limiter.size, 1, 'only the active key remains');
  t.same(limiter.take('k0', 20_000), { ok: true }, 'a dropped key starts full');
});

t.test('long keys are stored by hash', async (t) => {
  const limiter = new RateLimiter({ perSecond: 1, burst: 1 });
  const long = 'x'.repeat(KEY_CHARS_MAX + 1);
  t.same(limiter.take(long, 0), { ok: true });
  t.same(limiter.take(long, 0), { ok: false, retryAfterSeconds: 1 }, 'same bucket');
  t.same(limiter.take(`${long}y`, 0), { ok: true }, 'another long key, another bucket');
  t.same(limiter.take('x'.repeat(KEY_CHARS_MAX), 0), { ok: true });
  t.equal(limiter.size, 3);
});

t.test('takeOrThrow throws rate_limited with Retry-After in details', async (t) => {
  const limiter = new RateLimiter({ perSecond: 2, burst: 1 });
  t.doesNotThrow(() => limiter.takeOrThrow('k', 0));
  t.throws(() => limiter.takeOrThrow('k', 0, { accessKeyId: 'k' }), {
    code: 'rate_limited',
    status: 429,
    details: { accessKeyId: 'k', retryAfterSeconds: 1 },
  });
});

t.test('bad settings are refused', async (t) => {
  const bad = [
    { perSecond: 0, burst: 1 },
    { perSecond: -1, burst: 1 },
    { perSecond: Number.NaN, burst: 1 },
    { perSecond: Number.POSITIVE_INFINITY, burst: 1 },
    { perSecond: 1, burst: 0 },
    { perSecond: 1, burst: 1.5 },
    { perSecond: 1, burst: 1, maxKeys: 0 },
    { perSecond: 1, burst: 1, maxKeys: 2.5 },
  ];
  for (const options of bad) {
    t.throws(() => new RateLimiter(options), { code: 'bad_request' }, JSON.stringify(options));
  }
  const limiter = new RateLimiter({ perSecond: 10, burst: 20 });
  t.equal(limiter.maxKeys, 100_000, 'default maxKeys');
});
