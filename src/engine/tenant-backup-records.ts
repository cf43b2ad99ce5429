// The records of a tenant backup (src/engine/tenant-backup.ts): `records`, newline-delimited
// JSON written and read one record at a time (bounded memory for a tenant of any size), sealed
// as every file of a tenant backup is (backup-seal.ts). Format `lightwell-tenant-backup`,
// version 2 (docs/console.md, "Tenant backup format"):
//   {"type":"header","format":"lightwell-tenant-backup","version":2,"tenantId","snapshotAt"}
//   {"type":"bucket", …the bucket's settings}         then the bucket's versions, in the
//   {"type":"version", …one version}                   order of the index: key (UTF-8 bytes),
//   {"type":"skipped","bucket","key","versionId","reason"}      then newest version first
//   {"type":"end","buckets","versions","skipped","bytes"}
// The end record proves the list whole; the frames' authentication proves it unaltered.
//
// Persists: the records file of every tenant backup.

import { Buffer } from 'node:buffer';
import { StringDecoder } from 'node:string_decoder';
import type {
  BucketRecord,
  NotificationConfigRecord,
  ObjectVersionRecord,
} from './index/schema.js';
import { SealedWriter, readSealed, type SealedFile } from './backup-seal.js';
import { CorruptData } from '../util/errors.js';

export const RECORDS_FILE = 'records';
export const RECORDS_FORMAT = 'lightwell-tenant-backup';
export const RECORDS_VERSION = 2;
/** A record longer than this is not one Lightwell wrote (bounded memory while reading). */
const RECORD_CHARS_MAX = 16 * 1024 * 1024;

export interface HeaderRecord {
  type: 'header';
  format: typeof RECORDS_FORMAT;
  version: typeof RECORDS_VERSION;
  tenantId: string;
  snapshotAt: number;
}

/** A webhook configuration, its signing secret opened (the records file is sealed). */
export type BackupNotification = Omit<NotificationConfigRecord, 'sealedSecret'> & {
  secret: string;
};

/** A bucket's settings that a backup keeps (every field of its record but its id). */
export const BUCKET_SETTINGS = [
  'lockDefault',
  'tags',
  'encryption',
  'cors',
  'policy',
  'acl',
  'publicAccessBlock',
  'lifecycle',
  'logging',
  'ownership',
] as const;

export type BucketBackupRecord = { type: 'bucket' } & Pick<
  BucketRecord,
  'name' | 'createdAt' | 'versioning' | 'objectLock' | (typeof BUCKET_SETTINGS)[number]
> & { notifications?: BackupNotification[] };

/** Where a version's bytes are: a sealed file of the backup. */
export interface VersionFile {
  path: string;
  nonce: string;
  /** Its size on disk, and the size and SHA-256 of the version's bytes. */
  bytes: number;
  size: number;
  sha256: string;
}

export type VersionFields = Omit<ObjectVersionRecord, 'chunks' | 'storedBytes' | 'sseCustomer'>;

export interface VersionBackupRecord extends VersionFields {
  type: 'version';
  bucket: string;
  /** Absent for a delete marker. */
  file?: VersionFile;
}

export interface SkippedRecord {
  type: 'skipped';
  bucket: string;
  key: string;
  versionId: string;
  reason: 'sse-c';
}

export interface EndRecord {
  type: 'end';
  buckets: number;
  versions: number;
  skipped: number;
  bytes: number;
}

export type BackupRecordLine =
  HeaderRecord | BucketBackupRecord | VersionBackupRecord | SkippedRecord | EndRecord;

/** Appends records to a new records file, a frame at a time. */
export class RecordsWriter {
  private constructor(private readonly sealed: SealedWriter) {}

  static async create(path: string, key: Buffer, nonce: string): Promise<RecordsWriter> {
    return new RecordsWriter(await SealedWriter.create(path, key, nonce));
  }

  async add(record: BackupRecordLine): Promise<void> {
    await this.sealed.write(Buffer.from(JSON.stringify(record) + '\n', 'utf8'));
  }

  finish(): Promise<SealedFile> {
    return this.sealed.finish();
  }

  abandon(): Promise<void> {
    return this.sealed.abandon();
  }
}

/**
 * The records of a records file in order, checked as they come: the header first (format,
 * version, and the tenant `tenantId` its manifest names), the end record last and nothing after
 * it; `done` answers the file's checksums.
 */
export async function* readRecords(
  path: string,
  key: Buffer,
  nonce: string,
  tenantId: string,
  done?: (file: SealedFile) => void,
): AsyncGenerator<Exclude<BackupRecordLine, HeaderRecord | EndRecord>, EndRecord> {
  const decoder = new StringDecoder('utf8');
  let carry = '';
  let header: HeaderRecord | undefined;
  let end: EndRecord | undefined;
  const parse = (line: string): BackupRecordLine => {
    try {
      return JSON.parse(line) as BackupRecordLine;
    } catch {
      throw CorruptData(`${path} holds a record that is not JSON`);
    }
  };
  for await (const plain of readSealed(path, key, nonce, done)) {
    carry += decoder.write(plain);
    const lines = carry.split('\n');
    carry = lines.pop() ?? '';
    if (carry.length > RECORD_CHARS_MAX) throw CorruptData(`${path} holds an overlong record`);
    for (const line of lines) {
      const record = parse(line);
      if (end) throw CorruptData(`${path} holds records after its end`);
      if (!header) {
        const first = record as { type?: unknown; format?: unknown; version?: unknown };
        if (
          first.type !== 'header' ||
          first.format !== RECORDS_FORMAT ||
          first.version !== RECORDS_VERSION
        )
          throw CorruptData(`${path} is not a ${RECORDS_FORMAT} of version ${RECORDS_VERSION}`);
        header = record as HeaderRecord;
        // The manifest is not sealed: a header of another tenant means swapped files.
        if (header.tenantId !== tenantId)
          throw CorruptData(`${path} is of tenant ${header.tenantId}, not ${tenantId}`);
        continue;
      }
      if (record.type === 'end') end = record;
      else if (record.type === 'header') throw CorruptData(`${path} holds a second header`);
      else yield record;
    }
  }
  if (carry !== '' || !end) throw CorruptData(`${path} ends before its end record`);
  return end;
}
