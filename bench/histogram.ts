// Latency histogram with log-linear buckets, in microseconds.
//
// Values below 2^SUB_BITS µs get one bucket each; above that, every power of two is split into
// 2^SUB_BITS linear sub-buckets, so a bucket is at most 1/32 (about 3%) wide relative to its
// value, from 1 µs to about 2^40 µs (12 days). Recording is an index computation and an
// increment, cheap enough for every request of a 100k req/s load. Percentiles report the upper
// edge of the bucket that holds the rank, so they never understate a latency.

import assert from 'node:assert/strict';

const SUB_BITS = 5;
const SUB_COUNT = 1 << SUB_BITS;
const EXPONENT_MAX = 40;
const BUCKET_COUNT = (EXPONENT_MAX - SUB_BITS + 2) * SUB_COUNT;

export class Histogram {
  private readonly counts = new Float64Array(BUCKET_COUNT);
  private total = 0;
  private sum = 0;
  private maxValue = 0;

  /** Records one latency in microseconds (fractions are truncated, negatives clamp to 0). */
  record(micros: number): void {
    const value = micros > 0 ? Math.floor(micros) : 0;
    const index = bucketIndex(value);
    this.counts[index] = (this.counts[index] ?? 0) + 1;
    this.total += 1;
    this.sum += value;
    if (value > this.maxValue) this.maxValue = value;
  }

  merge(other: Histogram): void {
    for (let i = 0; i < BUCKET_COUNT; i++) {
      this.counts[i] = (this.counts[i] ?? 0) + (other.counts[i] ?? 0);
    }
    this.total += other.total;
    this.sum += other.sum;
    this.maxValue = Math.max(this.maxValue, other.maxValue);
  }

  get count(): number {
    return this.total;
  }

  get max(): number {
    return this.maxValue;
  }

  get mean(): number {
    return this.total === 0 ? 0 : this.sum / this.total;
  }

  /** The value at quantile q (0 < q <= 1), in µs; 0 when empty. */
  percentile(q: number): number {
    assert.ok(q > 0 && q <= 1, 'quantile in (0, 1]');
    if (this.total === 0) return 0;
    const rank = Math.ceil(q * this.total);
    let seen = 0;
    for (let i = 0; i < BUCKET_COUNT; i++) {
      seen += this.counts[i] ?? 0;
      if (seen >= rank) return Math.min(bucketUpper(i), this.maxValue);
    }
    return this.maxValue;
  }
}

/** Bucket of an integer value: linear below SUB_COUNT, then SUB_COUNT per power of two. */
export function bucketIndex(value: number): number {
  if (value < SUB_COUNT) return value;
  let exponent = Math.floor(Math.log2(value));
  // log2 may round up just below a power of two; correct it so that 2^e <= value < 2^(e+1).
  if (2 ** exponent > value) exponent -= 1;
  exponent = Math.min(exponent, EXPONENT_MAX);
  const shift = exponent - SUB_BITS;
  const sub = Math.min(Math.floor(value / 2 ** shift) - SUB_COUNT, SUB_COUNT - 1);
  return (shift + 1) * SUB_COUNT + sub;
}

/** Largest integer value that falls into bucket `index`. */
export function bucketUpper(index: number): number {
  if (index < SUB_COUNT) return index;
  const shift = Math.floor(index / SUB_COUNT) - 1;
  const sub = index % SUB_COUNT;
  return (SUB_COUNT + sub + 1) * 2 ** shift - 1;
}
