// Goal: current code reads the SSE-C and named-KMS-key fields as they were first written
// (test/golden/encryption-v1/, written once by test/golden/make-encryption-v1.ts) and still
// writes the same bytes: SSE-C versions (single and multipart), an SSE-C upload and part, and a
// tenant with named keys; the engine's checks accept the stored SSE-C records as they are.
// Method: compare every committed file with what today's key builders and value codec make of
// the same fields, decode them field by field, and run the engine's record checks on them.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { decodeValue, encodeValue } from '../../src/format/values.js';
import { checkSseCustomer, checkSseSalt } from '../../src/engine/ops/encryption.js';
import type {
  MultipartPartRecord,
  ObjectVersionRecord,
  TenantRecord,
} from '../../src/engine/index/schema.js';
import { repoRoot } from '../golden/golden-dir.js';
import { encryptionGoldenRows } from '../golden/make-encryption-v1.js';

const directory = join(repoRoot(), 'test', 'golden', 'encryption-v1');

function golden(name: string): Buffer {
  return readFileSync(join(directory, name));
}

function decoded(name: string): unknown {
  return decodeValue(golden(`${name}.value`)).value;
}

t.test('every row: the same key bytes, the same value bytes, the same fields', async (t) => {
  for (const row of encryptionGoldenRows()) {
    t.ok(golden(`${row.name}.key`).equals(row.key), `${row.name}: key bytes`);
    const value = golden(`${row.name}.value`);
    t.ok(value.equals(encodeValue(1, row.value)), `${row.name}: value bytes`);
    const { schemaVersion, value: fields } = decodeValue(value);
    t.equal(schemaVersion, 1);
    t.same(fields, row.value, `${row.name}: fields`);
  }
});

t.test('the SSE-C records read back as the engine checks them', async (t) => {
  const single = decoded('version-sse-c') as ObjectVersionRecord;
  t.ok(Buffer.isBuffer(single.sseCustomer?.salt), 'binary fields decode as bytes');
  t.same(checkSseCustomer(single.sseCustomer), single.sseCustomer);
  const multipart = decoded('version-sse-c-multipart') as ObjectVersionRecord;
  t.equal(multipart.sseCustomer?.partSalts?.length, 16 * (multipart.partSizes?.length ?? 0));
  t.same(checkSseCustomer(multipart.sseCustomer), multipart.sseCustomer, 'with its part salts');
  const part = decoded('part-sse-c') as MultipartPartRecord;
  t.same(checkSseSalt(part.sseSalt), part.sseSalt);
  const tenant = decoded('tenant-kms-keys') as TenantRecord;
  t.same(
    tenant.kmsKeys?.map((key) => key.id),
    ['testkey-1', 'alias/backups'],
  );
});
