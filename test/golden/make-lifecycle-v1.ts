// Generator of the lifecycle index rows' golden files (format version 1, schema version 1 of
// `lifecycle-due`, `lifecycle-subjects`, `lifecycle-jobs` and a bucket's `lifecycle` field). It
// was run ONCE, when these databases were added.
//
// NEVER RUN IT AGAIN. test/golden/lifecycle-v1/ is data "written by" that release and is read
// forever by test/format/golden-lifecycle-v1.test.ts. It refuses to overwrite files and writes
// only when given --write-once:
//
//   node dist/test/golden/make-lifecycle-v1.js --write-once
//
// It writes one file per row: `<name>.key` and `<name>.value`, the exact bytes LMDB holds.
//
// When tap runs the compiled test tree it also runs this file, which then does nothing.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeValue } from '../../src/format/values.js';
import {
  dueKey,
  jobKey,
  uploadSubjectKey,
  versionSubjectKey,
} from '../../src/engine/index/lifecycle-schema.js';
import { tenantChildKey } from '../../src/engine/index/schema.js';
import { repoRoot } from './golden-dir.js';

/** The rows, shared with the test: what each file holds, as the writers build it. */
export function lifecycleGoldenRows(): Array<{ name: string; key: Buffer; value: object }> {
  const version = versionSubjectKey(7, 'logs/2026/01/a.json', 0x1_0000_0002);
  const upload = uploadSubjectKey(7, 'big/upload', '0000019b7b9c2a80a1a2a3a4a5a6a7a8');
  const due = Date.UTC(2026, 0, 3);
  return [
    { name: 'subject-version', key: version, value: { due } },
    { name: 'subject-upload', key: upload, value: { due: due + 86_400_000 } },
    { name: 'due-version', key: dueKey(due, version), value: { tenantId: 'acme', bucket: 'logs' } },
    {
      name: 'job',
      key: jobKey(7),
      value: {
        bucketId: 7,
        tenantId: 'acme',
        bucket: 'logs',
        phase: 'versions',
        after: Buffer.from('000000076c6f67732f00', 'hex'),
        startedAt: Date.UTC(2026, 0, 1, 10, 30),
      },
    },
    {
      name: 'bucket-rules',
      key: tenantChildKey('acme', 'logs'),
      value: {
        id: 7,
        tenantId: 'acme',
        name: 'logs',
        createdAt: Date.UTC(2026, 0, 1),
        versioning: 'Enabled',
        objectLock: false,
        lifecycle: [
          {
            id: 'expire-logs',
            status: 'Enabled',
            filter: { form: 'and', prefix: 'logs/', tags: [{ key: 'tier', value: 'hot' }] },
            expiration: { days: 30 },
            noncurrentExpiration: { noncurrentDays: 7, newerNoncurrentVersions: 3 },
          },
          {
            id: 'uploads',
            status: 'Disabled',
            filter: { form: 'prefix', prefix: '' },
            expiration: { expiredObjectDeleteMarker: true },
            abortIncompleteMultipartUpload: { daysAfterInitiation: 2 },
          },
          {
            id: 'sized',
            status: 'Enabled',
            filter: { form: 'filter', sizeGreaterThan: 1024 },
            expiration: { date: Date.UTC(2027, 0, 1) },
          },
        ],
      },
    },
  ];
}

function main(): void {
  if (!process.argv.includes('--write-once')) return;
  const directory = join(repoRoot(), 'test', 'golden', 'lifecycle-v1');
  for (const row of lifecycleGoldenRows()) {
    writeFileSync(join(directory, `${row.name}.key`), row.key, { flag: 'wx' });
    writeFileSync(join(directory, `${row.name}.value`), encodeValue(1, row.value), { flag: 'wx' });
  }
}

main();
