// Continuation tokens of object listings: where a page ended, bound to the listing it ended.
//
// A token is `base64url(version u8 = 1 | kind u8 | position | mac [16])`:
// - kind is `k` when the page ended at a key, `p` when it ended at a common prefix (a key may
//   itself end with the delimiter, so the position alone cannot say which);
// - position is the UTF-8 of that key or prefix;
// - mac is the first 16 bytes of HMAC-SHA256 under the key derived for `PURPOSE_LIST_TOKEN` over
//   `bucket id u32 BE | prefix length u16 BE | prefix | delimiter length u16 BE | delimiter |
//   kind | position`.
//
// So a token is honoured only by the listing that issued it: the same bucket (a bucket deleted
// and created again has a new id), prefix and delimiter. An edited token, or one carried to
// another listing, is 400, as S3 answers, instead of listing from wherever it points. The key is
// derived from the master key, so every gateway of a data directory accepts every other's tokens,
// and tokens outlive restarts. `maxKeys` is not bound: a client may change its page size.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { BadRequest } from '../util/errors.js';
import { validateObjectKey } from '../security/names.js';

/** Where a listing page ended: a key, or a common prefix. */
export interface ListPosition {
  readonly kind: 'key' | 'prefix';
  readonly value: string;
}

/** What a token is bound to: the bucket and the listing's parameters. */
export interface ListBinding {
  readonly bucketId: number;
  readonly prefix: string;
  readonly delimiter: string;
}

const TOKEN_VERSION = 1;
const MAC_BYTES = 16;
/** Longest token text: a 1024-byte key with the version, kind and mac, in base64url. */
const TOKEN_CHARS_MAX = Math.ceil(((2 + 1024 + MAC_BYTES) * 4) / 3);
const KIND_KEY = 0x6b; // k
const KIND_PREFIX = 0x70; // p

export class ListTokens {
  constructor(private readonly key: Buffer) {}

  encode(binding: ListBinding, position: ListPosition): string {
    const value = Buffer.from(position.value, 'utf8');
    const kind = position.kind === 'key' ? KIND_KEY : KIND_PREFIX;
    const head = Buffer.from([TOKEN_VERSION, kind]);
    const mac = this.mac(binding, kind, value);
    return Buffer.concat([head, value, mac]).toString('base64url');
  }

  /** The position of a token this listing issued; 400 for anything else. */
  decode(binding: ListBinding, token: string): ListPosition {
    if (token.length > TOKEN_CHARS_MAX || !/^[A-Za-z0-9_-]+$/.test(token)) throw refused();
    const bytes = Buffer.from(token, 'base64url');
    if (bytes.length < 2 + MAC_BYTES || bytes[0] !== TOKEN_VERSION) throw refused();
    const kind = bytes[1] as number;
    if (kind !== KIND_KEY && kind !== KIND_PREFIX) throw refused();
    const value = bytes.subarray(2, bytes.length - MAC_BYTES);
    // In constant time: a comparison that stopped at the first wrong byte would let a client
    // forge a token a byte at a time from the answer times.
    const mac = bytes.subarray(bytes.length - MAC_BYTES);
    if (!timingSafeEqual(this.mac(binding, kind, value), mac)) throw refused();
    const text = value.toString('utf8');
    validateObjectKey(text, { allowEmpty: true, what: 'the continuationToken' });
    return { kind: kind === KIND_KEY ? 'key' : 'prefix', value: text };
  }

  private mac(binding: ListBinding, kind: number, value: Buffer): Buffer {
    const prefix = Buffer.from(binding.prefix, 'utf8');
    const delimiter = Buffer.from(binding.delimiter, 'utf8');
    const fixed = Buffer.alloc(4 + 2 + prefix.length + 2 + delimiter.length + 1);
    let at = fixed.writeUInt32BE(binding.bucketId, 0);
    at = fixed.writeUInt16BE(prefix.length, at);
    at += prefix.copy(fixed, at);
    at = fixed.writeUInt16BE(delimiter.length, at);
    at += delimiter.copy(fixed, at);
    fixed[at] = kind;
    return createHmac('sha256', this.key)
      .update(fixed)
      .update(value)
      .digest()
      .subarray(0, MAC_BYTES);
  }
}

function refused(): Error {
  return BadRequest(
    'continuationToken is not one this listing issued (it must come from the previous page of ' +
      'the same bucket, prefix and delimiter, unchanged)',
  );
}
