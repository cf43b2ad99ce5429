// Expected checksums for tests, computed apart from Lightwell's own code (@node-rs/crc32), in
// the form the service answers them (`X-Service-Checksum-CRC32C`: the big-endian value, base64).
import { crc32c } from '@node-rs/crc32';

export function crc32cBase64(body: Buffer): string {
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc32c(body) >>> 0);
  return digest.toString('base64');
}
