// Generator of the golden LMDB index (format version 1, schema version 1 of every family): one
// environment, `test/golden/index-v1/data.mdb`, holding one row of each core record family
// (docs/on-disk-format.md §5.1 lists them byte for byte). It was run ONCE, when the index got
// golden data.
//
// NEVER RUN IT AGAIN. test/golden/index-v1/ is data "written by" that release and is read
// forever by test/format/golden-index-v1.test.ts. It refuses to overwrite the file and writes
// only when given --write-once:
//
//   node dist/test/golden/make-index-v1.js --write-once
//
// The rows go in through `IndexStore` (its LMDB options are the format's), in one transaction,
// and the environment is then copied compacted (`IndexStore.backup`), so the file holds those
// rows and nothing else of the writer's history. The lifecycle and encryption fields have golden
// rows of their own (test/golden/lifecycle-v1/, test/golden/encryption-v1/).
//
// When tap runs the compiled test tree it also runs this file, which then does nothing.

import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  META_COUNTERS,
  META_MASTER_KEY_CHECK,
  META_NODE,
  accessLogKey,
  auditKey,
  auditTenantKey,
  bucketKeyPrefix,
  bucketNameKey,
  chunkKey,
  idempotencyKey,
  multipartPartKey,
  multipartUploadKey,
  objectKey,
  outboxKey,
  segmentKey,
  tenantChildKey,
  tenantKey,
  versionKey,
  type DbName,
} from '../../src/engine/index/schema.js';
import { repoRoot } from './golden-dir.js';

export interface IndexGoldenRow {
  /** A name for the row, unique in the golden (docs/on-disk-format.md §5.1 uses it). */
  readonly name: string;
  readonly db: DbName;
  readonly key: Buffer;
  readonly value: object;
}

const T0 = Date.UTC(2026, 0, 1); // 1767225600000
const bytes = (hex: string): Buffer => Buffer.from(hex, 'hex');
/** Chunk A of the v1 segment golden (test/golden/v1/segment.seg): segment 42, offset 64. */
const CHUNK_ID = Buffer.from([...Array(32).keys()]);
const UPLOAD_ID = '0000019b7b9c2a80a1a2a3a4a5a6a7a8';
/** A version's chunk list: the chunk id and its plain length (u32 LE), 36 bytes. */
const CHUNKS = Buffer.concat([CHUNK_ID, bytes('19000000')]);
const AUDIT = auditKey(T0 + 5_000, 3);

/** The rows, shared with the test: what the golden holds, as the writers build it. */
export function indexGoldenRows(): IndexGoldenRow[] {
  const version = {
    key: 'logs/a.txt',
    versionId: '0000000000000004',
    seq: 4,
    lastModified: T0 + 4_000,
    size: 25,
    etag: '"0cc175b9c0f1b6a831c399e269772661"',
    contentType: 'text/plain',
    metadata: { owner: 'ops' },
    checksums: { CRC32C: 'J9ndVQ==' },
    chunks: CHUNKS,
    storedBytes: 105,
    compressed: false,
  };
  return [
    {
      name: 'counters',
      db: DB.meta,
      key: META_COUNTERS,
      value: { nextTenantNum: 8, nextBucketId: 8, nextSegmentId: 43, nextSeq: 5 },
    },
    {
      name: 'node',
      db: DB.meta,
      key: META_NODE,
      value: { id: 'node-0123456789abcdef', createdAt: T0 },
    },
    {
      name: 'master-key-check',
      db: DB.meta,
      key: META_MASTER_KEY_CHECK,
      value: { check: bytes('00112233445566778899aabbccddeeff'), recordedAt: T0 },
    },
    {
      name: 'tenant',
      db: DB.tenants,
      key: tenantKey('acme'),
      value: {
        id: 'acme',
        num: 7,
        state: 'active',
        createdAt: T0,
        wrappedKey: Buffer.concat([bytes('01'), bytes('a0'.repeat(12)), bytes('5a'.repeat(48))]),
      },
    },
    {
      name: 'account',
      db: DB.accounts,
      key: tenantChildKey('acme', 'ops'),
      value: { id: 'ops', tenantId: 'acme', createdAt: T0 },
    },
    {
      name: 'access-key',
      db: DB.accessKeys,
      key: Buffer.from('LWAKGOLDEN0000000001'),
      value: {
        accessKeyId: 'LWAKGOLDEN0000000001',
        tenantId: 'acme',
        accountId: 'ops',
        scopes: 'read,write',
        sealedSecret: Buffer.concat([bytes('01'), bytes('b0'.repeat(12)), bytes('6b'.repeat(56))]),
        state: 'active',
        createdAt: T0,
      },
    },
    {
      name: 'admin-token',
      db: DB.adminTokens,
      key: Buffer.from('ab'.repeat(32)),
      value: { tokenId: 'tok-1', hash: 'ab'.repeat(32), role: 'owner', createdAt: T0 },
    },
    {
      name: 'bucket',
      db: DB.buckets,
      key: tenantChildKey('acme', 'logs'),
      value: {
        id: 7,
        tenantId: 'acme',
        name: 'logs',
        createdAt: T0 + 1_000,
        versioning: 'Enabled',
        objectLock: false,
      },
    },
    {
      name: 'bucket-name',
      db: DB.bucketNames,
      key: bucketNameKey('logs'),
      value: { tenantId: 'acme' },
    },
    { name: 'object', db: DB.objects, key: objectKey(7, 'logs/a.txt'), value: version },
    { name: 'version', db: DB.versions, key: versionKey(7, 'logs/a.txt', 4), value: version },
    {
      name: 'chunk',
      db: DB.chunks,
      key: chunkKey(7, CHUNK_ID),
      value: {
        segmentId: 42,
        offset: 64,
        length: 105,
        plainLength: 25,
        payloadChecksum: 0x27d9dd55,
        refs: 1,
      },
    },
    {
      name: 'segment',
      db: DB.segments,
      key: segmentKey(42),
      value: {
        id: 42,
        state: 'sealed',
        createdAt: T0 + 123,
        size: 593,
        liveBytes: 105,
        sealedAt: T0 + 2_000,
      },
    },
    {
      name: 'usage',
      db: DB.usage,
      key: tenantKey('acme'),
      value: {
        tenantId: 'acme',
        logicalBytes: 25,
        physicalBytes: 105,
        objects: 1,
        versions: 1,
        deleteMarkers: 0,
        buckets: { logs: { logicalBytes: 25, objects: 1, versions: 1, deleteMarkers: 0 } },
      },
    },
    {
      name: 'quota',
      db: DB.quotas,
      key: tenantKey('acme'),
      value: { tenantId: 'acme', maxBytes: 2 ** 40, maxObjects: 1_000_000 },
    },
    {
      name: 'audit',
      db: DB.audit,
      key: AUDIT,
      value: {
        id: AUDIT.toString('hex'),
        time: T0 + 5_000,
        requestId: 'req-1',
        tenantId: 'acme',
        actor: 'key:LWAKGOLDEN0000000001',
        action: 'object.put',
        resource: 'logs/logs/a.txt',
        outcome: 'success',
        status: 200,
      },
    },
    {
      name: 'audit-by-tenant',
      db: DB.auditByTenant,
      key: auditTenantKey('acme', AUDIT),
      value: {
        id: AUDIT.toString('hex'),
        time: T0 + 5_000,
        requestId: 'req-1',
        tenantId: 'acme',
        actor: 'key:LWAKGOLDEN0000000001',
        action: 'object.put',
        resource: 'logs/logs/a.txt',
        outcome: 'success',
        status: 200,
      },
    },
    {
      name: 'idempotency',
      db: DB.idempotency,
      key: idempotencyKey('acme', 'logs', 'put-1'),
      value: {
        state: 'running',
        fingerprint: 'f1',
        startedAt: T0 + 3_000,
        expiresAt: T0 + 86_403_000,
        ownerPid: 4242,
        claim: '0123456789abcdef',
      },
    },
    {
      name: 'upload',
      db: DB.multipart,
      key: multipartUploadKey(7, 'big', UPLOAD_ID),
      value: {
        uploadId: UPLOAD_ID,
        tenantId: 'acme',
        bucketId: 7,
        bucket: 'logs',
        key: 'big',
        initiatedAt: T0 + 6_000,
        contentType: 'application/octet-stream',
        metadata: {},
      },
    },
    {
      name: 'part',
      db: DB.multipartParts,
      key: multipartPartKey(7, 'big', UPLOAD_ID, 1),
      value: {
        partNumber: 1,
        size: 25,
        etag: '"0cc175b9c0f1b6a831c399e269772661"',
        checksums: { CRC32C: 'J9ndVQ==', SHA256: 'n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=' },
        chunks: CHUNKS,
        storedBytes: 105,
        compressed: false,
        lastModified: T0 + 7_000,
        quotaCounted: true,
      },
    },
    {
      name: 'notifications',
      db: DB.notifications,
      key: bucketKeyPrefix(7),
      value: {
        tenantId: 'acme',
        bucketId: 7,
        bucket: 'logs',
        configs: [
          {
            id: 'hook',
            type: 'webhook',
            url: 'https://hooks.example/lw',
            events: ['object-created'],
            sealedSecret: Buffer.concat([
              bytes('01'),
              bytes('c0'.repeat(12)),
              bytes('7c'.repeat(48)),
            ]),
            createdAt: T0,
          },
        ],
        updatedAt: T0,
      },
    },
    {
      name: 'outbox',
      db: DB.outbox,
      key: outboxKey(7, 'hook', 4),
      value: {
        seq: 4,
        tenantId: 'acme',
        bucketId: 7,
        configId: 'hook',
        event: {
          id: 'evt-4',
          type: 'object-created',
          time: '2026-01-01T00:00:04.000Z',
          tenantId: 'acme',
          bucket: 'logs',
          key: 'logs/a.txt',
          versionId: '0000000000000004',
          size: 25,
        },
        createdAt: T0 + 4_000,
        attempts: 0,
        nextAttemptAt: T0 + 4_000,
      },
    },
    {
      name: 'outbox-status',
      db: DB.outboxStatus,
      key: bucketKeyPrefix(7),
      value: {
        bucketId: 7,
        tenantId: 'acme',
        bucket: 'logs',
        pending: 1,
        delivered: 0,
        failedAttempts: 0,
        discarded: 0,
      },
    },
    {
      name: 'access-log',
      db: DB.accessLog,
      key: accessLogKey('logs-archive/s/access/', AUDIT),
      value: {
        line: 'acme logs [01/Jan/2026:00:00:05 +0000] - req-1 REST.PUT.OBJECT logs/a.txt 200',
        sourceBucket: 'logs',
        sourceTenant: 'acme',
        time: T0 + 5_000,
      },
    },
  ];
}

async function main(): Promise<void> {
  if (!process.argv.includes('--write-once')) return;
  const target = join(repoRoot(), 'test', 'golden', 'index-v1', 'data.mdb');
  if (existsSync(target)) throw new Error(`${target} exists; golden data is never regenerated`);
  const scratch = mkdtempSync(join(tmpdir(), 'lw-golden-index-'));
  try {
    const store = IndexStore.open({ path: join(scratch, 'live'), readOnly: false });
    await store.transact(() => {
      for (const row of indexGoldenRows()) store.put(row.db, row.key, row.value);
    });
    mkdirSync(join(scratch, 'copy'));
    await store.backup(join(scratch, 'copy'));
    await store.close();
    copyFileSync(join(scratch, 'copy', 'data.mdb'), target);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();

/**
 * The rows as docs/on-disk-format.md §5.1 lists them: per row a `[db] name` line, then `key`
 * and `value` in hex, 32 bytes a line, continued under the first.
 */
export function renderIndexGolden(
  rows: ReadonlyArray<{ name: string; db: string; key: Buffer; value: Buffer }>,
): string {
  const field = (label: string, data: Buffer): string[] => {
    const hex = data.toString('hex');
    const lines: string[] = [];
    for (let at = 0; at < hex.length || at === 0; at += 64)
      lines.push(`${at === 0 ? label.padEnd(6) : ' '.repeat(6)}${hex.slice(at, at + 64)}`);
    return lines;
  };
  return rows
    .map((row) =>
      [`[${row.db}] ${row.name}`, ...field('key', row.key), ...field('value', row.value)].join(
        '\n',
      ),
    )
    .join('\n');
}
