// Token-bucket rate limiting per key (access-key id for token mints, admin token id for the
// admin API), in memory, with a hard bound on memory.
//
// Invariants:
// - Each key has a bucket of at most `burst` tokens, refilled at `perSecond`; a request takes
//   one token or is refused with the whole seconds until one is available (Retry-After).
// - A key that is absent behaves exactly like a full bucket, so a full bucket can be dropped
//   at any time without changing any answer. Entries are kept in least-recently-used order
//   (Map insertion order; every use moves a key to the end), and each call drops up to
//   `SWEEP_PER_TAKE` idle full buckets from the old end.
// - There are never more than `maxKeys` buckets. When a new key arrives at the limit and the
//   oldest bucket is still draining, that bucket is dropped anyway: memory stays bounded, and
//   the cost is that a flood of more than `maxKeys` distinct keys inside one refill window
//   can reset the oldest limits. Callers validate keys (ACCESS_KEY_ID_PATTERN) before taking.
// - Keys longer than `KEY_CHARS_MAX` are stored by their SHA-256, so a hostile key cannot
//   make one entry large.
// - Time only moves forward: a clock that steps back refills nothing.
//
// Persists: nothing; limits restart empty (full) with the process.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { BadRequest, RateLimited, type ErrorDetails } from '../util/errors.js';

export const RATE_LIMIT_KEYS_MAX_DEFAULT = 100_000;
export const KEY_CHARS_MAX = 256;
const SWEEP_PER_TAKE = 2;

export interface RateLimiterOptions {
  readonly perSecond: number;
  readonly burst: number;
  readonly maxKeys?: number;
}

export type RateLimitResult =
  { readonly ok: true } | { readonly ok: false; readonly retryAfterSeconds: number };

interface Bucket {
  tokens: number;
  updatedMs: number;
}

export class RateLimiter {
  readonly perSecond: number;
  readonly burst: number;
  readonly maxKeys: number;
  private readonly buckets = new Map<string, Bucket>();

  constructor(options: RateLimiterOptions) {
    const { perSecond, burst, maxKeys = RATE_LIMIT_KEYS_MAX_DEFAULT } = options;
    if (!(Number.isFinite(perSecond) && perSecond > 0)) {
      throw BadRequest(`rate limit must be a positive rate, got ${perSecond}/s`);
    }
    if (!(Number.isSafeInteger(burst) && burst >= 1)) {
      throw BadRequest(`rate limit burst must be a whole number of at least 1, got ${burst}`);
    }
    if (!(Number.isSafeInteger(maxKeys) && maxKeys >= 1)) {
      throw BadRequest(`rate limiter maxKeys must be a whole number of at least 1, got ${maxKeys}`);
    }
    this.perSecond = perSecond;
    this.burst = burst;
    this.maxKeys = maxKeys;
  }

  /** Buckets currently held (idle full buckets may or may not have been dropped yet). */
  get size(): number {
    return this.buckets.size;
  }

  /** Takes one token for `key` at time `nowMs`. */
  take(key: string, nowMs: number): RateLimitResult {
    assert.ok(Number.isFinite(nowMs), 'nowMs must be a finite time');
    const id = bucketId(key);
    this.sweep(nowMs);
    const existing = this.buckets.get(id);
    const bucket = existing ?? { tokens: this.burst, updatedMs: nowMs };
    if (existing === undefined) {
      this.makeRoom();
    } else {
      this.refill(bucket, nowMs);
      this.buckets.delete(id);
    }
    this.buckets.set(id, bucket);
    assert.ok(this.buckets.size <= this.maxKeys);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { ok: true };
    }
    const seconds = Math.ceil((1 - bucket.tokens) / this.perSecond);
    return { ok: false, retryAfterSeconds: Math.max(1, seconds) };
  }

  /** `take`, but a refusal throws `rate_limited` with `retryAfterSeconds` in details. */
  takeOrThrow(key: string, nowMs: number, details: ErrorDetails = {}): void {
    const result = this.take(key, nowMs);
    if (!result.ok) {
      throw RateLimited('rate limit exceeded', {
        ...details,
        retryAfterSeconds: result.retryAfterSeconds,
      });
    }
  }

  private refill(bucket: Bucket, nowMs: number): void {
    if (nowMs <= bucket.updatedMs) return;
    const added = ((nowMs - bucket.updatedMs) * this.perSecond) / 1000;
    bucket.tokens = Math.min(this.burst, bucket.tokens + added);
    bucket.updatedMs = nowMs;
  }

  private isFull(bucket: Bucket, nowMs: number): boolean {
    const elapsedMs = Math.max(0, nowMs - bucket.updatedMs);
    return bucket.tokens + (elapsedMs * this.perSecond) / 1000 >= this.burst;
  }

  /** Drops up to SWEEP_PER_TAKE idle full buckets from the least recently used end. */
  private sweep(nowMs: number): void {
    for (let dropped = 0; dropped < SWEEP_PER_TAKE; dropped += 1) {
      const oldest = this.buckets.entries().next();
      if (oldest.done === true || !this.isFull(oldest.value[1], nowMs)) return;
      this.buckets.delete(oldest.value[0]);
    }
  }

  /** Before adding a key at the limit: drops the least recently used bucket. */
  private makeRoom(): void {
    while (this.buckets.size >= this.maxKeys) {
      const oldest = this.buckets.keys().next();
      assert.ok(oldest.done !== true);
      this.buckets.delete(oldest.value);
    }
  }
}

/** Short keys as themselves, long ones by hash; the tag keeps the two spaces apart. */
function bucketId(key: string): string {
  if (key.length <= KEY_CHARS_MAX) return `k:${key}`;
  return `h:${createHash('sha256').update(key, 'utf8').digest('base64url')}`;
}
