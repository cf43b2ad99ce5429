// The seal footer: the last record of a sealed segment.
//
// Sealing makes a segment immutable. The footer is an ordinary record (record-frame.ts) of
// kind 2 with no codecs, tenant 0, zero chunk id and nonce, and a 32-byte payload that counts
// the chunk records before it and says where they end. A reader that finds an intact footer
// whose dataEnd equals the footer's own file offset knows the segment is complete; recovery
// never truncates a sealed segment.
//
// Invariants (docs/on-disk-format.md, "Seal footer"):
// - Payload integers little-endian; the reserved u64 written as zero and ignored by readers.
// - dataEnd ≥ SEGMENT_HEADER_SIZE, and recordCount chunk records fit in [header end, dataEnd).
// - The footer's header and payload checksums are those of any record.

import assert from 'node:assert/strict';
import { FormatError } from '../util/errors.js';
import { readU64, writeU64 } from './primitives.js';
import {
  CIPHER_NONE,
  COMPRESSION_NONE,
  RECORD_HEADER_SIZE,
  RECORD_KIND_SEAL,
  RECORD_SEAL_PAYLOAD_LENGTH,
  decodeRecordHeader,
  encodeRecord,
  verifyPayload,
  type RecordHeader,
} from './record-frame.js';
import { SEGMENT_HEADER_SIZE } from './segment-header.js';

export const SEAL_PAYLOAD_SIZE = 32;
/** Header plus payload: the bytes a seal footer adds to a segment. */
export const SEAL_RECORD_SIZE = RECORD_HEADER_SIZE + SEAL_PAYLOAD_SIZE;

export const OFFSET_SEAL_RECORD_COUNT = 0;
export const SIZE_SEAL_RECORD_COUNT = 8;
export const OFFSET_SEAL_DATA_END = 8;
export const SIZE_SEAL_DATA_END = 8;
export const OFFSET_SEAL_SEALED_AT_MS = 16;
export const SIZE_SEAL_SEALED_AT_MS = 8;
export const OFFSET_SEAL_RESERVED24 = 24;
export const SIZE_SEAL_RESERVED24 = 8;

assert.equal(SEAL_PAYLOAD_SIZE, RECORD_SEAL_PAYLOAD_LENGTH);
assert.equal(OFFSET_SEAL_RESERVED24 + SIZE_SEAL_RESERVED24, SEAL_PAYLOAD_SIZE);

export interface SealFooter {
  /** Chunk records in the segment, all before the footer. */
  readonly recordCount: number;
  /** File offset where the footer starts, which is where the chunk records end. */
  readonly dataEnd: number;
  readonly sealedAtMs: number;
}

const sealChunkId = new Uint8Array(32);
const sealNonce = new Uint8Array(12);

/** Encodes the whole footer record: header and payload, SEAL_RECORD_SIZE bytes. */
export function encodeSealFooter(footer: SealFooter): Buffer {
  assert.equal(sealFooterProblem(footer), undefined);
  const payload = Buffer.alloc(SEAL_PAYLOAD_SIZE);
  writeU64(payload, OFFSET_SEAL_RECORD_COUNT, footer.recordCount);
  writeU64(payload, OFFSET_SEAL_DATA_END, footer.dataEnd);
  writeU64(payload, OFFSET_SEAL_SEALED_AT_MS, footer.sealedAtMs);
  const target = encodeRecord(
    {
      kind: RECORD_KIND_SEAL,
      compression: COMPRESSION_NONE,
      cipher: CIPHER_NONE,
      tenantNum: 0,
      plainLength: SEAL_PAYLOAD_SIZE,
      chunkId: sealChunkId,
      nonce: sealNonce,
    },
    payload,
  );
  assert.equal(target.length, SEAL_RECORD_SIZE);
  assert.deepEqual(decodeSealFooter(target, 0), footer);
  return target;
}

/** Decodes and verifies the footer record (header and payload) at `offset` of `source`. */
export function decodeSealFooter(source: Buffer, offset: number): SealFooter {
  const header = decodeRecordHeader(source, offset);
  if (header.kind !== RECORD_KIND_SEAL) {
    throw FormatError('record is not a seal footer', { offset, kind: header.kind });
  }
  const payloadStart = offset + RECORD_HEADER_SIZE;
  if (payloadStart + header.payloadLength > source.length) {
    throw FormatError('seal footer is truncated', { offset });
  }
  const payload = source.subarray(payloadStart, payloadStart + header.payloadLength);
  return decodeSealPayload(header, payload);
}

/** Decodes the payload of a seal record whose header is already decoded (from scanRecords). */
export function decodeSealPayload(header: RecordHeader, payload: Buffer): SealFooter {
  if (header.kind !== RECORD_KIND_SEAL) {
    throw FormatError('record is not a seal footer', { kind: header.kind });
  }
  verifyPayload(header, payload);
  const footer: SealFooter = {
    recordCount: readU64(payload, OFFSET_SEAL_RECORD_COUNT, 'recordCount'),
    dataEnd: readU64(payload, OFFSET_SEAL_DATA_END, 'dataEnd'),
    sealedAtMs: readU64(payload, OFFSET_SEAL_SEALED_AT_MS, 'sealedAtMs'),
  };
  const problem = sealFooterProblem(footer);
  if (problem !== undefined) throw FormatError(problem, { ...footer });
  return footer;
}

function sealFooterProblem(footer: SealFooter): string | undefined {
  for (const value of [footer.recordCount, footer.dataEnd, footer.sealedAtMs]) {
    if (!Number.isSafeInteger(value) || value < 0) return 'seal footer field out of range';
  }
  if (footer.dataEnd < SEGMENT_HEADER_SIZE) return 'seal footer dataEnd inside segment header';
  if (footer.recordCount * RECORD_HEADER_SIZE > footer.dataEnd - SEGMENT_HEADER_SIZE) {
    return 'seal footer recordCount does not fit before dataEnd';
  }
  return undefined;
}
