// The BitTorrent pieces of an object version, for S3's GetObjectTorrent: the SHA-1 of each
// TORRENT_PIECE_BYTES piece of the object's bytes, as a metainfo file's `pieces` carries them.
//
// - As on S3, a torrent is made only of an object smaller than 5 GiB and not stored under a
//   customer key (SSE-C: the server cannot read it without the key, and a torrent would publish
//   hashes of its plaintext); both are refused with reason `torrent_unavailable`.
// - The bytes are read through the download pipeline (versionBytes: a bounded read-ahead, each
//   piece given back once hashed) and hashed as they arrive: memory stays at a few chunks
//   whatever the object's size, and the event loop hashes at most one chunk between awaits.
//
// Persists: nothing.

import { createHash, type Hash } from 'node:crypto';
import type { ObjectVersionRecord } from '../engine/index/schema.js';
import type { TenantKeyMaterial } from '../workers/protocol.js';
import { BadRequest } from '../util/errors.js';
import { versionBytes, type DownloadServices } from './download.js';

/** The piece length of a torrent (BitTorrent's common 256 KiB). */
export const TORRENT_PIECE_BYTES = 256 * 1024;

/** Objects of this size or more get no torrent (S3's limit). */
export const TORRENT_OBJECT_BYTES_MAX = 5 * 1024 ** 3;

/** Refuses a version S3 makes no torrent of (see the header). */
export function checkTorrentable(version: ObjectVersionRecord): void {
  if (version.sseCustomer !== undefined)
    throw BadRequest('no torrent is made of an object under a customer key (SSE-C)', {
      reason: 'torrent_unavailable',
    });
  if (version.size >= TORRENT_OBJECT_BYTES_MAX)
    throw BadRequest('no torrent is made of an object of 5 GiB or more', {
      reason: 'torrent_unavailable',
    });
}

/** The concatenated SHA-1 digests of the version's pieces (20 bytes each, in order). */
export async function torrentPieces(
  download: DownloadServices,
  keys: TenantKeyMaterial,
  version: ObjectVersionRecord,
): Promise<Buffer> {
  checkTorrentable(version);
  const digests: Buffer[] = [];
  let hash: Hash = createHash('sha1');
  let filled = 0;
  for await (const chunk of versionBytes(download, keys, version, undefined)) {
    let bytes = new Uint8Array(chunk);
    while (bytes.length > 0) {
      const take = Math.min(bytes.length, TORRENT_PIECE_BYTES - filled);
      hash.update(bytes.subarray(0, take));
      filled += take;
      bytes = bytes.subarray(take);
      if (filled === TORRENT_PIECE_BYTES) {
        digests.push(hash.digest());
        hash = createHash('sha1');
        filled = 0;
      }
    }
  }
  if (filled > 0) digests.push(hash.digest());
  return Buffer.concat(digests);
}
