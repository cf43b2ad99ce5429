// Goal: current code reads the lifecycle index rows as they were first written
// (test/golden/lifecycle-v1/, written once by test/golden/make-lifecycle-v1.ts) and still writes
// the same bytes: the due-date key, both subject keys, the job and a bucket's rules.
// Method: compare every committed file with what today's key builders and value codec make of
// the same fields, and decode the committed keys and values field by field.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { decodeValue, encodeValue } from '../../src/format/values.js';
import {
  decodeDueKey,
  decodeSubjectKey,
  SUBJECT_UPLOAD,
  SUBJECT_VERSION,
} from '../../src/engine/index/lifecycle-schema.js';
import { repoRoot } from '../golden/golden-dir.js';
import { lifecycleGoldenRows } from '../golden/make-lifecycle-v1.js';

const directory = join(repoRoot(), 'test', 'golden', 'lifecycle-v1');

function golden(name: string): Buffer {
  return readFileSync(join(directory, name));
}

t.test('every row: the same key bytes, the same value bytes, the same fields', async (t) => {
  for (const row of lifecycleGoldenRows()) {
    t.ok(golden(`${row.name}.key`).equals(row.key), `${row.name}: key bytes`);
    const value = golden(`${row.name}.value`);
    t.ok(value.equals(encodeValue(1, row.value)), `${row.name}: value bytes`);
    const decoded = decodeValue(value);
    t.equal(decoded.schemaVersion, 1);
    t.same(decoded.value, row.value, `${row.name}: fields`);
  }
});

t.test('the keys decode to what they name', async (t) => {
  t.same(decodeSubjectKey(golden('subject-version.key')), {
    bucketId: 7,
    kind: SUBJECT_VERSION,
    key: 'logs/2026/01/a.json',
    seq: 0x1_0000_0002,
    uploadId: '',
  });
  t.same(decodeSubjectKey(golden('subject-upload.key')), {
    bucketId: 7,
    kind: SUBJECT_UPLOAD,
    key: 'big/upload',
    seq: 0,
    uploadId: '0000019b7b9c2a80a1a2a3a4a5a6a7a8',
  });
  const due = decodeDueKey(golden('due-version.key'));
  t.equal(due.due, Date.UTC(2026, 0, 3));
  t.ok(due.subject.equals(golden('subject-version.key')), 'a due key ends with its subject');
  t.equal(golden('job.key').toString('hex'), '00000007');
});
