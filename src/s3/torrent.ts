// S3's GetObjectTorrent (`GET /bucket/key?torrent`): a BitTorrent metainfo file of the object,
// `application/x-bittorrent`, bencoded (BEP 3) with its keys in sorted order.
//
// - `info`: the object's `length`, its key as `name`, `piece length` and `pieces` (the SHA-1 of
//   each piece, service/torrent.ts, which also refuses objects S3 makes no torrent of).
// - Lightwell runs no tracker: the file has no `announce`; the object's own URL is its web seed
//   (`url-list`, BEP 19), from which a client fetches pieces over HTTP (a public object, or one
//   a presigned URL reaches).
//
// Persists: nothing.

import assert from 'node:assert/strict';
import type { S3Api, S3Request } from './api.js';
import { s3Error } from './errors.js';
import { objectStoreOf } from './objects.js';
import { tlsFilesOf } from '../util/config.js';
import { isLightwellError } from '../util/errors.js';
import { TORRENT_PIECE_BYTES, checkTorrentable, torrentPieces } from '../service/torrent.js';

export function registerTorrent(api: S3Api): void {
  api.register('GetObjectTorrent', getObjectTorrent);
}

/** A bencodable value: integers, byte strings, lists and dictionaries. */
export type Bencodable = number | string | Buffer | readonly Bencodable[] | BencodeDict;
export interface BencodeDict {
  readonly [key: string]: Bencodable;
}

/** The bencoding of `value`; a dictionary's keys in the byte order of their UTF-8. */
export function bencode(value: Bencodable): Buffer {
  const out: Buffer[] = [];
  const put = (item: Bencodable): void => {
    if (typeof item === 'number') {
      assert.ok(Number.isSafeInteger(item), 'bencode takes integers only');
      out.push(Buffer.from(`i${item}e`));
    } else if (typeof item === 'string' || Buffer.isBuffer(item)) {
      const bytes = typeof item === 'string' ? Buffer.from(item, 'utf8') : item;
      out.push(Buffer.from(`${bytes.length}:`), bytes);
    } else if (Array.isArray(item)) {
      out.push(Buffer.from('l'));
      for (const element of item as readonly Bencodable[]) put(element);
      out.push(Buffer.from('e'));
    } else {
      const dict = item as BencodeDict;
      out.push(Buffer.from('d'));
      const keys = Object.keys(dict).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      for (const key of keys) {
        put(key);
        put(dict[key] as Bencodable);
      }
      out.push(Buffer.from('e'));
    }
  };
  put(value);
  return Buffer.concat(out);
}

async function getObjectTorrent(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const { bucket, key } = request.address;
  if (bucket === undefined || key === undefined) throw s3Error('InvalidRequest', 'no object named');
  const read = objectStoreOf(request).resolveRead(request, {
    bucket,
    key,
    versionId: request.exchange.queryParam('versionId'),
  });
  const { version } = read;
  let pieces: Buffer;
  try {
    checkTorrentable(version);
    pieces = await torrentPieces(
      request.services.download,
      request.services.auth.keysOf(principal.tenant),
      version,
    );
  } catch (error) {
    if (isLightwellError(error) && error.details['reason'] === 'torrent_unavailable')
      throw s3Error('InvalidRequest', error.message);
    throw error;
  }
  const metainfo = bencode({
    'created by': 'Lightwell',
    'creation date': Math.floor(version.lastModified / 1000),
    info: {
      length: version.size,
      name: key,
      'piece length': TORRENT_PIECE_BYTES,
      pieces,
    },
    'url-list': [webSeedOf(request, bucket, key)],
  });
  const headers: Record<string, string> = {
    'Content-Type': 'application/x-bittorrent',
    'Content-Disposition': `attachment; filename="${torrentFileName(key)}"`,
  };
  if (read.versioned) headers['x-amz-version-id'] = version.versionId;
  request.send(200, headers, metainfo);
}

/** The object's URL (path-style) on the listener the request came in on. */
function webSeedOf(request: S3Request, bucket: string, key: string): string {
  const scheme = tlsFilesOf(request.services.settings) === undefined ? 'http' : 'https';
  const host = request.exchange.header('host') ?? 'localhost';
  const path = key.split('/').map(encodeURIComponent).join('/');
  return `${scheme}://${host}/${encodeURIComponent(bucket)}/${path}`;
}

/** The last segment of the key, reduced to characters safe in a quoted header value. */
function torrentFileName(key: string): string {
  const base = key.slice(key.lastIndexOf('/') + 1).replace(/[^\w.-]/g, '_');
  return `${base === '' ? 'object' : base.slice(0, 200)}.torrent`;
}
