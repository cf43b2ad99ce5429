// Generator of the golden files of the SSE-C and named-KMS-key fields (format version 1, schema
// version 1 of `objects`/`versions`, `multipart`, `multipart-parts` and `tenants`): an SSE-C
// version of a single PUT and of a multipart upload, an SSE-C upload and one of its parts, and a
// tenant with named KMS keys. It was run ONCE, when these fields were added.
//
// NEVER RUN IT AGAIN. test/golden/encryption-v1/ is data "written by" that release and is read
// forever by test/format/golden-encryption-v1.test.ts. It refuses to overwrite files and writes
// only when given --write-once:
//
//   node dist/test/golden/make-encryption-v1.js --write-once
//
// It writes one file per row: `<name>.key` and `<name>.value`, the exact bytes LMDB holds.
//
// When tap runs the compiled test tree it also runs this file, which then does nothing.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeValue } from '../../src/format/values.js';
import {
  multipartPartKey,
  multipartUploadKey,
  objectKey,
  tenantKey,
} from '../../src/engine/index/schema.js';
import { repoRoot } from './golden-dir.js';

const bytes = (hex: string): Buffer => Buffer.from(hex, 'hex');
const SALT = bytes('00112233445566778899aabbccddeeff');
const VERIFIER = bytes('a0'.repeat(16) + 'b1'.repeat(16));
const UPLOAD_ID = '0000019b7b9c2a80a1a2a3a4a5a6a7a8';
const CHUNK = Buffer.concat([bytes('c2'.repeat(32)), bytes('0b000000')]);

/** The rows, shared with the test: what each file holds, as the writers build it. */
export function encryptionGoldenRows(): Array<{ name: string; key: Buffer; value: object }> {
  const version = {
    key: 'secret/a.bin',
    versionId: 'null',
    seq: 42,
    lastModified: Date.UTC(2026, 11, 7, 12),
    size: 11,
    etag: '"0f1e2d3c4b5a69788796a5b4c3d2e1f0"',
    contentType: 'application/octet-stream',
    metadata: {},
    checksums: { CRC32C: 'yZRlqg==' },
    chunks: CHUNK,
    storedBytes: 11,
    compressed: false,
    sseCustomer: { salt: SALT, verifier: VERIFIER },
  };
  return [
    { name: 'version-sse-c', key: objectKey(7, 'secret/a.bin'), value: version },
    {
      name: 'version-sse-c-multipart',
      key: objectKey(7, 'secret/mp.bin'),
      value: {
        ...version,
        key: 'secret/mp.bin',
        size: 22,
        etag: '"9d5f8e0b2c1a4d3e6f7a8b9c0d1e2f3a-2"',
        chunks: Buffer.concat([CHUNK, CHUNK]),
        partSizes: [11, 11],
        sseCustomer: {
          salt: SALT,
          verifier: VERIFIER,
          partSalts: Buffer.concat([bytes('01'.repeat(16)), bytes('02'.repeat(16))]),
        },
      },
    },
    {
      name: 'upload-sse-c',
      key: multipartUploadKey(7, 'secret/mp.bin', UPLOAD_ID),
      value: {
        uploadId: UPLOAD_ID,
        tenantId: 'acme',
        bucketId: 7,
        bucket: 'vault',
        key: 'secret/mp.bin',
        initiatedAt: Date.UTC(2026, 11, 7, 11),
        contentType: 'application/octet-stream',
        metadata: {},
        sseCustomer: { salt: SALT, verifier: VERIFIER },
      },
    },
    {
      name: 'part-sse-c',
      key: multipartPartKey(7, 'secret/mp.bin', UPLOAD_ID, 1),
      value: {
        partNumber: 1,
        size: 11,
        etag: '"5a4b3c2d1e0f99887766554433221100"',
        checksums: { CRC32C: 'yZRlqg==', SHA256: 'n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=' },
        chunks: CHUNK,
        storedBytes: 11,
        compressed: false,
        lastModified: Date.UTC(2026, 11, 7, 11, 30),
        quotaCounted: true,
        sseSalt: bytes('01'.repeat(16)),
      },
    },
    {
      name: 'tenant-kms-keys',
      key: tenantKey('acme'),
      value: {
        id: 'acme',
        num: 3,
        state: 'active',
        createdAt: Date.UTC(2026, 0, 1),
        wrappedKey: bytes('ee'.repeat(60)),
        kmsKeys: [
          { id: 'testkey-1', createdAt: Date.UTC(2026, 11, 7), description: 'preset' },
          { id: 'alias/backups', createdAt: Date.UTC(2026, 11, 7, 1) },
        ],
      },
    },
  ];
}

function main(): void {
  if (!process.argv.includes('--write-once')) return;
  const directory = join(repoRoot(), 'test', 'golden', 'encryption-v1');
  for (const row of encryptionGoldenRows()) {
    writeFileSync(join(directory, `${row.name}.key`), row.key, { flag: 'wx' });
    writeFileSync(join(directory, `${row.name}.value`), encodeValue(1, row.value), { flag: 'wx' });
  }
}

main();
