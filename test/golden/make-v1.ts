// Generator of the format version 1 golden files. It was run ONCE, when version 1 was defined.
//
// NEVER RUN IT AGAIN. test/golden/v1/ is data "written by release 1" and is read forever by
// test/format/golden-v1.test.ts: if current code cannot read it, current code is wrong, not the
// golden data. A new format version gets a new generator (make-v2.ts) and a new directory.
// The script refuses to overwrite existing files and only writes when given --write-once:
//
//   node dist/test/golden/make-v1.js --write-once
//
// It writes:
// - v1/FORMAT: a data directory marker.
// - v1/segment.seg: segment 42 with three chunk records and a seal footer:
//   A: no compression, no cipher: a short text.
//   B: AES-256-GCM, no compression: a text encrypted with GOLDEN_V1_KEY, AAD = header [0, 56).
//   C: lz4 then AES-256-GCM: 4096 bytes of repeated text.
// The key is a fixed, public test key: B and C prove the AAD and codec order, not secrecy.
//
// When tap runs the compiled test tree it also runs this file, which then does nothing.

import { createCipheriv } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { compressSync } from 'lz4-napi';
import { encodeMarker } from '../../src/format/marker.js';
import {
  CIPHER_AES_256_GCM,
  CIPHER_NONE,
  CIPHER_TAG_SIZE,
  COMPRESSION_LZ4,
  COMPRESSION_NONE,
  RECORD_HEADER_SIZE,
  RECORD_KIND_CHUNK,
  encodeRecord,
  recordAad,
  sealRecordHeader,
  writeRecordHeader,
  type RecordFields,
} from '../../src/format/record-frame.js';
import { encodeSealFooter } from '../../src/format/seal-footer.js';
import { encodeSegmentHeader } from '../../src/format/segment-header.js';
import { goldenDir } from './golden-dir.js';

const GOLDEN_V1_KEY = Buffer.from('lightwell-golden-v1-not-a-secret', 'latin1');

function ascending(first: number, length: number): Buffer {
  const bytes = Buffer.alloc(length);
  for (let i = 0; i < length; i++) bytes.writeUInt8((first + i) & 0xff, i);
  return bytes;
}

function encryptedRecord(fields: Omit<RecordFields, 'payloadLength'>, plain: Buffer): Buffer {
  const target = Buffer.alloc(RECORD_HEADER_SIZE + plain.length + CIPHER_TAG_SIZE);
  writeRecordHeader(target, 0, { ...fields, payloadLength: plain.length + CIPHER_TAG_SIZE });
  const cipher = createCipheriv('aes-256-gcm', GOLDEN_V1_KEY, fields.nonce);
  cipher.setAAD(recordAad(target, 0));
  const ciphertext = Buffer.concat([cipher.update(plain), cipher.final()]);
  ciphertext.copy(target, RECORD_HEADER_SIZE);
  cipher.getAuthTag().copy(target, RECORD_HEADER_SIZE + ciphertext.length);
  sealRecordHeader(target, 0, crc32c(target.subarray(RECORD_HEADER_SIZE)));
  return target;
}

function buildSegment(): Buffer {
  const header = encodeSegmentHeader({ segmentId: 42, createdAtMs: 1767225600123 });
  const plainA = Buffer.from('Lightwell golden chunk A\n', 'latin1');
  const recordA = encodeRecord(
    {
      kind: RECORD_KIND_CHUNK,
      compression: COMPRESSION_NONE,
      cipher: CIPHER_NONE,
      tenantNum: 7,
      plainLength: plainA.length,
      chunkId: ascending(0x00, 32),
      nonce: Buffer.alloc(12),
    },
    plainA,
  );
  const plainB = Buffer.from('Lightwell golden chunk B, encrypted\n', 'latin1');
  const recordB = encryptedRecord(
    {
      kind: RECORD_KIND_CHUNK,
      compression: COMPRESSION_NONE,
      cipher: CIPHER_AES_256_GCM,
      tenantNum: 7,
      plainLength: plainB.length,
      chunkId: ascending(0x20, 32),
      nonce: ascending(0xa0, 12),
    },
    plainB,
  );
  const plainC = Buffer.alloc(4096);
  plainC.fill('Lightwell golden chunk C, compressed then encrypted.\n', 'latin1');
  const recordC = encryptedRecord(
    {
      kind: RECORD_KIND_CHUNK,
      compression: COMPRESSION_LZ4,
      cipher: CIPHER_AES_256_GCM,
      tenantNum: 0xfffffffe,
      plainLength: plainC.length,
      chunkId: ascending(0xc0, 32),
      nonce: ascending(0xb0, 12),
    },
    compressSync(plainC),
  );
  const data = Buffer.concat([header, recordA, recordB, recordC]);
  const footer = encodeSealFooter({
    recordCount: 3,
    dataEnd: data.length,
    sealedAtMs: 1767225660000,
  });
  return Buffer.concat([data, footer]);
}

function main(): void {
  if (!process.argv.includes('--write-once')) return;
  const directory = goldenDir(1);
  const marker = encodeMarker({ createdBy: 'lightwell-0.1.0', createdAtMs: 1767225600000 });
  // 'wx' fails if the file exists: golden data is never regenerated.
  writeFileSync(join(directory, 'FORMAT'), marker, { flag: 'wx' });
  writeFileSync(join(directory, 'segment.seg'), buildSegment(), { flag: 'wx' });
  process.stdout.write(`wrote ${directory}\n`);
}

main();
