// CRC-32C, the checksum of every record, header and marker on disk and of the CRC32C object
// checksum: through Lightwell's native library where it is built and the CPU has SSE4.2 and
// PCLMULQDQ (three interleaved instruction chains, 16-23 GB/s on this project's machines), else
// through @node-rs/crc32 (one chain, 3.5-4.9 GB/s). Both answer the same value for the same
// bytes; tests hold them against each other and against the standard check value.

import { crc32c as portableCrc32c } from '@node-rs/crc32';
import { native } from './libc.js';

export type Crc32cImplementation = 'native' | '@node-rs/crc32';

let chosen: ((bytes: Uint8Array, initial: number) => number) | undefined;

/** CRC-32C of `bytes`, continuing from `initial` (the CRC of the bytes before them). */
export function crc32c(bytes: Uint8Array, initial = 0): number {
  chosen ??= native()?.crc32c ?? crc32cPortable;
  return chosen(bytes, initial);
}

/** Which implementation `crc32c` uses in this thread. */
export function crc32cImplementation(): Crc32cImplementation {
  return native()?.crc32c ? 'native' : '@node-rs/crc32';
}

/** The portable implementation, whichever `crc32c` uses. */
export function crc32cPortable(bytes: Uint8Array, initial = 0): number {
  return portableCrc32c(
    Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length),
    initial,
  );
}
