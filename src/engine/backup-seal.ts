// Encryption of a tenant backup's files (src/engine/tenant-backup.ts): every file of a tenant
// backup (its records and each version's bytes) is sealed under the backup's data key, so the
// directory or the bucket that holds a backup reveals no object name, metadata or byte.
//
// A sealed file is a sequence of frames, each AES-256-GCM over up to FRAME_BYTES of plaintext:
//   frame i = ciphertext(plain_i) | tag (16 bytes)
//   iv      = fileNonce (8 bytes, random per file, kept in the record naming the file) | u32be(i)
//   aad     = "lightwell-backup-frame-v1" | fileNonce | u32be(i) | u8(final)
// Every frame but the last holds exactly FRAME_BYTES of plaintext; the last holds fewer (maybe
// none) and is marked final in its AAD, so a truncated, extended, reordered or swapped file
// fails authentication instead of reading short.
//
// The data key is random per backup chain (a backup and the incremental ones over it share
// it, so their linked files stay readable) and stored in the manifest wrapped by a key derived
// from the master key (HKDF, purpose `tenant-backup-wrap-v1`), bound to the chain id. A backup
// therefore opens only with the master key it was taken under (its fingerprint is in the
// manifest); docs/console.md states the threat model.

import { Buffer } from 'node:buffer';
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import assert from 'node:assert/strict';
import { deriveKey, openSecret, sealSecret } from '../security/keys.js';
import { CorruptData } from '../util/errors.js';

/** Plaintext bytes per frame. */
export const FRAME_BYTES = 1024 * 1024;
const TAG_BYTES = 16;
const NONCE_BYTES = 8;
const FRAME_AAD = Buffer.from('lightwell-backup-frame-v1', 'utf8');
const PURPOSE_BACKUP_WRAP = 'tenant-backup-wrap-v1';

/** What the manifest keeps of a backup's data key. */
export interface BackupKeyRecord {
  algorithm: 'aes-256-gcm';
  /** The chain's id: the backups that share this key. */
  keyId: string;
  /** The data key sealed under the wrap key derived from the master key. */
  wrappedKey: string;
  /** The fingerprint of the master key that wraps it (master-key-rotation.ts). */
  masterKey: string;
}

export function newBackupKey(
  master: Buffer,
  fingerprint: string,
): { key: Buffer; record: BackupKeyRecord } {
  const key = randomBytes(32);
  const keyId = randomBytes(8).toString('hex');
  return { key, record: wrapBackupKey(master, fingerprint, keyId, key) };
}

export function wrapBackupKey(
  master: Buffer,
  fingerprint: string,
  keyId: string,
  key: Buffer,
): BackupKeyRecord {
  const sealed = sealSecret(deriveKey(master, PURPOSE_BACKUP_WRAP), key, `backup-key:${keyId}`);
  return {
    algorithm: 'aes-256-gcm',
    keyId,
    wrappedKey: sealed.toString('base64'),
    masterKey: fingerprint,
  };
}

/** The data key of a backup, or a corrupt_data naming the master key it needs. */
export function unwrapBackupKey(master: Buffer, fingerprint: string, record: BackupKeyRecord) {
  if (record.masterKey !== fingerprint)
    throw CorruptData(
      `the backup is sealed under master key ${record.masterKey}, not the store's ` +
        `${fingerprint}: it opens only with the key it was taken under`,
    );
  return openSecret(
    deriveKey(master, PURPOSE_BACKUP_WRAP),
    Buffer.from(record.wrappedKey, 'base64'),
    `backup-key:${record.keyId}`,
  );
}

export function newFileNonce(): string {
  return randomBytes(NONCE_BYTES).toString('hex');
}

function frameCipher(nonce: Buffer, index: number, final: boolean) {
  const iv = Buffer.alloc(12);
  nonce.copy(iv, 0);
  iv.writeUInt32BE(index, NONCE_BYTES);
  const aad = Buffer.alloc(FRAME_AAD.length + NONCE_BYTES + 5);
  FRAME_AAD.copy(aad, 0);
  nonce.copy(aad, FRAME_AAD.length);
  aad.writeUInt32BE(index, FRAME_AAD.length + NONCE_BYTES);
  aad.writeUInt8(final ? 1 : 0, FRAME_AAD.length + NONCE_BYTES + 4);
  return { iv, aad };
}

/** What a sealed file holds: its size on disk and the SHA-256 of its plaintext and its bytes. */
export interface SealedFile {
  bytes: number;
  plainBytes: number;
  /** SHA-256 of the plaintext. */
  sha256: string;
  /** SHA-256 of the file as stored. */
  fileSha256: string;
}

/** Writes a new sealed file (mode 0600) frame by frame; `finish` makes it durable. */
export class SealedWriter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private index = 0;
  private offset = 0;
  private plainBytes = 0;
  private readonly plainHash = createHash('sha256');
  private readonly fileHash = createHash('sha256');
  private readonly nonce: Buffer;

  private constructor(
    private readonly file: FileHandle,
    private readonly key: Buffer,
    nonce: string,
  ) {
    this.nonce = Buffer.from(nonce, 'hex');
    assert.equal(this.nonce.length, NONCE_BYTES, 'a file nonce is 8 bytes');
  }

  static async create(path: string, key: Buffer, nonce: string): Promise<SealedWriter> {
    const file = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    return new SealedWriter(file, key, nonce);
  }

  async write(bytes: Buffer): Promise<void> {
    let rest = bytes;
    while (rest.length > 0) {
      const take = Math.min(rest.length, FRAME_BYTES - this.pendingBytes);
      this.pending.push(rest.subarray(0, take));
      this.pendingBytes += take;
      rest = rest.subarray(take);
      // A full frame is never the last: the last frame is always shorter (maybe empty).
      if (this.pendingBytes === FRAME_BYTES) await this.flush(false);
    }
  }

  private async flush(final: boolean): Promise<void> {
    const plain = Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    const { iv, aad } = frameCipher(this.nonce, this.index, final);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad);
    const frame = Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    await this.file.write(frame, 0, frame.length, this.offset);
    this.plainHash.update(plain);
    this.fileHash.update(frame);
    this.offset += frame.length;
    this.plainBytes += plain.length;
    this.index += 1;
  }

  async finish(): Promise<SealedFile> {
    try {
      await this.flush(true);
      await this.file.datasync();
    } finally {
      await this.file.close();
    }
    return {
      bytes: this.offset,
      plainBytes: this.plainBytes,
      sha256: this.plainHash.digest('hex'),
      fileSha256: this.fileHash.digest('hex'),
    };
  }

  async abandon(): Promise<void> {
    await this.file.close();
  }
}

/**
 * The plaintext of a sealed file, frame by frame, each authenticated before it is answered;
 * `done` answers what the whole file held once the final frame was read.
 */
export async function* readSealed(
  path: string,
  key: Buffer,
  nonce: string,
  done?: (file: SealedFile) => void,
): AsyncGenerator<Buffer> {
  const nonceBytes = Buffer.from(nonce, 'hex');
  const file = await open(path, constants.O_RDONLY);
  const plainHash = createHash('sha256');
  const fileHash = createHash('sha256');
  const frameBytes = FRAME_BYTES + TAG_BYTES;
  let offset = 0;
  let plainBytes = 0;
  try {
    for (let index = 0; ; index += 1) {
      const buffer = Buffer.allocUnsafe(frameBytes);
      let got = 0;
      while (got < frameBytes) {
        const { bytesRead } = await file.read(buffer, got, frameBytes - got, offset + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      const final = got < frameBytes;
      if (got < TAG_BYTES) throw CorruptData(`${path} is truncated (frame ${String(index)})`);
      const { iv, aad } = frameCipher(nonceBytes, index, final);
      const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(aad);
      decipher.setAuthTag(buffer.subarray(got - TAG_BYTES, got));
      let plain: Buffer;
      try {
        plain = Buffer.concat([
          decipher.update(buffer.subarray(0, got - TAG_BYTES)),
          decipher.final(),
        ]);
      } catch {
        throw CorruptData(`${path} fails authentication at frame ${String(index)}`);
      }
      fileHash.update(buffer.subarray(0, got));
      plainHash.update(plain);
      offset += got;
      plainBytes += plain.length;
      if (plain.length > 0) yield plain;
      if (final) break;
    }
  } finally {
    await file.close();
  }
  done?.({
    bytes: offset,
    plainBytes,
    sha256: plainHash.digest('hex'),
    fileSha256: fileHash.digest('hex'),
  });
}
