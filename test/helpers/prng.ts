// A seeded pseudo-random generator for tests whose choices must replay from a seed (the fault
// simulation, the crash tests). Not for secrets.
//
// This module is a helper, not a test; tap lists it as "no tests found".

/** A small, fast PRNG (SplitMix32 seeding a xorshift128): the same seed, the same run. */
export class Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    let s = seed >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next() | 1;
  }

  /** A uniform 32-bit unsigned integer. */
  u32(): number {
    const t = this.a ^ (this.a << 11);
    this.a = this.b;
    this.b = this.c;
    this.c = this.d;
    this.d = (this.d ^ (this.d >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
    return this.d;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor((this.u32() / 0x1_0000_0000) * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return p > 0 && this.u32() / 0x1_0000_0000 < p;
  }

  /** A number in [0, 1). */
  float(): number {
    return this.u32() / 0x1_0000_0000;
  }

  bytes(length: number): Buffer {
    const out = Buffer.allocUnsafe(length);
    let i = 0;
    for (; i + 4 <= length; i += 4) out.writeUInt32LE(this.u32(), i);
    for (; i < length; i += 1) out[i] = this.u32() & 0xff;
    return out;
  }
}

/**
 * The seed of a test run: the environment variable `name` when set (to replay a run), else a
 * fresh one. The caller prints it.
 */
export function seedFrom(name: string): number {
  const given = process.env[name];
  if (given !== undefined && given !== '') return Number(given) >>> 0;
  return Math.floor(Math.random() * 0x1_0000_0000) >>> 0;
}
