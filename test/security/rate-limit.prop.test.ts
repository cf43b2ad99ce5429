// Goal: dropping idle full buckets never changes an answer, and no key ever gets more than
// burst + perSecond × elapsed requests through.
// Method: fast-check drives the limiter and a plain reference model (no eviction) with the
// same random schedule of keys and clock steps and compares every answer. The seed is printed
// and FC_SEED replays it.
import t from 'tap';
import fc from 'fast-check';
import { RateLimiter } from '../../src/security/rate-limit.js';

const seed = Number(process.env['FC_SEED'] ?? Date.now() % 2 ** 31);
t.comment(`fast-check seed ${seed} (replay with FC_SEED=${seed})`);

class ReferenceLimiter {
  private readonly state = new Map<string, { tokens: number; atMs: number }>();
  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
  ) {}

  take(key: string, nowMs: number): boolean {
    const bucket = this.state.get(key) ?? { tokens: this.burst, atMs: nowMs };
    const elapsed = Math.max(0, nowMs - bucket.atMs);
    bucket.tokens = Math.min(this.burst, bucket.tokens + (elapsed * this.perSecond) / 1000);
    bucket.atMs = Math.max(bucket.atMs, nowMs);
    this.state.set(key, bucket);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }
}

const step = fc.record({
  key: fc.constantFrom('a', 'b', 'c', 'd'),
  advanceMs: fc.nat({ max: 700 }),
});
const settings = fc.record({
  perSecond: fc.constantFrom(0.5, 1, 3, 10),
  burst: fc.integer({ min: 1, max: 5 }),
});

t.test('answers equal the reference model, whatever gets dropped', async (t) => {
  fc.assert(
    fc.property(settings, fc.array(step, { maxLength: 200 }), ({ perSecond, burst }, steps) => {
      const limiter = new RateLimiter({ perSecond, burst });
      const reference = new ReferenceLimiter(perSecond, burst);
      let nowMs = 0;
      for (const { key, advanceMs } of steps) {
        nowMs += advanceMs;
        if (limiter.take(key, nowMs).ok !== reference.take(key, nowMs)) return false;
      }
      return limiter.size <= 4;
    }),
    { seed, numRuns: 500 },
  );
  t.pass('same answers');
});

t.test('no key exceeds burst + perSecond × elapsed, even with maxKeys pressure', async (t) => {
  fc.assert(
    fc.property(settings, fc.array(step, { maxLength: 200 }), ({ perSecond, burst }, steps) => {
      const limiter = new RateLimiter({ perSecond, burst, maxKeys: 4 });
      const granted = new Map<string, number>();
      let nowMs = 0;
      for (const { key, advanceMs } of steps) {
        nowMs += advanceMs;
        const result = limiter.take(key, nowMs);
        if (result.ok) granted.set(key, (granted.get(key) ?? 0) + 1);
        else if (!(Number.isInteger(result.retryAfterSeconds) && result.retryAfterSeconds >= 1)) {
          return false;
        }
      }
      const ceiling = burst + (perSecond * nowMs) / 1000;
      return [...granted.values()].every((count) => count <= ceiling + 1e-9);
    }),
    { seed, numRuns: 500 },
  );
  t.pass('bounded');
});
