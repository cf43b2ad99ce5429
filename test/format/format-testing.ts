// Shared helpers of the format tests: fast-check settings, error classification, checksum
// repair and arbitraries for record frames.
//
// This module is a helper, not a test; tap lists it as "no tests found".
//
// fast-check prints the seed and path of every failure. To replay one, set FC_SEED (and
// FC_PATH) in the environment; FC_NUM_RUNS raises the number of runs for a longer soak.

import { crc32c } from '@node-rs/crc32';
import fc from 'fast-check';
import { errorCode } from '../../src/util/errors.js';
import {
  CIPHER_AES_256_GCM,
  CIPHER_NONE,
  CIPHER_TAG_SIZE,
  COMPRESSION_LZ4,
  COMPRESSION_NONE,
  LZ4_SIZE_PREFIX_SIZE,
  RECORD_KIND_CHUNK,
  RECORD_PLAIN_LENGTH_MAX,
  type Cipher,
  type Compression,
  type RecordFields,
} from '../../src/format/record-frame.js';

/** Applies FC_SEED, FC_PATH and FC_NUM_RUNS from the environment, if set. */
export function configureFastCheck(): void {
  const seed = process.env['FC_SEED'];
  const path = process.env['FC_PATH'];
  const numRuns = process.env['FC_NUM_RUNS'];
  fc.configureGlobal({
    ...(seed === undefined ? {} : { seed: Number(seed) }),
    ...(path === undefined ? {} : { path }),
    ...(numRuns === undefined ? {} : { numRuns: Number(numRuns) }),
  });
}

export type FormatOutcome = 'ok' | 'format_error' | 'format_too_new';

/** Runs `decode` and classifies the result; any other error is rethrown (a test failure). */
export function formatOutcome(decode: () => unknown): FormatOutcome {
  try {
    decode();
    return 'ok';
  } catch (error) {
    const code = errorCode(error);
    if (code === 'format_error' || code === 'format_too_new') return code;
    throw error;
  }
}

/** Recomputes the CRC32C of `target[start, checksumOffset)` into the u32 at checksumOffset. */
export function reseal(target: Buffer, checksumOffset: number, start = 0): Buffer {
  target.writeUInt32LE(crc32c(target.subarray(start, checksumOffset)), checksumOffset);
  return target;
}

/** A copy of `source` with bit `bit` (0 = lowest bit of byte 0) flipped. */
export function flipBit(source: Buffer, bit: number): Buffer {
  const target = Buffer.from(source);
  const index = Math.floor(bit / 8);
  target.writeUInt8(target.readUInt8(index) ^ (1 << (bit % 8)), index);
  return target;
}

export interface RecordInput {
  readonly fields: Omit<RecordFields, 'payloadLength'>;
  readonly payload: Buffer;
}

/** Valid chunk records: every codec combination, payloads of consistent lengths. */
export const recordInputArbitrary: fc.Arbitrary<RecordInput> = fc
  .record({
    compression: fc.constantFrom<Compression>(COMPRESSION_NONE, COMPRESSION_LZ4),
    cipher: fc.constantFrom<Cipher>(CIPHER_NONE, CIPHER_AES_256_GCM),
  })
  .chain(({ compression, cipher }) => {
    const tagSize = cipher === CIPHER_AES_256_GCM ? CIPHER_TAG_SIZE : 0;
    const payloadMin = tagSize + (compression === COMPRESSION_LZ4 ? LZ4_SIZE_PREFIX_SIZE : 0);
    return fc
      .record({
        tenantNum: fc.nat({ max: 0xffffffff }),
        lz4PlainLength: fc.nat({ max: RECORD_PLAIN_LENGTH_MAX }),
        chunkId: fc.uint8Array({ minLength: 32, maxLength: 32 }),
        nonce: fc.uint8Array({ minLength: 12, maxLength: 12 }),
        payload: fc.uint8Array({ minLength: payloadMin, maxLength: payloadMin + 200 }),
      })
      .map(({ tenantNum, lz4PlainLength, chunkId, nonce, payload }): RecordInput => {
        const plainLength =
          compression === COMPRESSION_LZ4 ? lz4PlainLength : payload.length - tagSize;
        return {
          fields: {
            kind: RECORD_KIND_CHUNK,
            compression,
            cipher,
            tenantNum,
            plainLength,
            chunkId: Buffer.from(chunkId),
            nonce: cipher === CIPHER_NONE ? Buffer.alloc(12) : Buffer.from(nonce),
          },
          payload: Buffer.from(payload),
        };
      });
  });
