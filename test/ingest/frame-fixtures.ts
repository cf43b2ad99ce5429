// The frames of the ingest golden files (test/golden/ingest-v1/): one of each type, with every
// field of its own. test/golden/make-ingest-v1.ts wrote the files once from these; the golden
// test decodes the files back into them and encodes them into the files' bytes.
//
// This module is a helper, not a test; tap lists it as "no tests found".

import {
  PROTOCOL_VERSION,
  encodeAck,
  encodeCredit,
  encodeData,
  encodeHello,
  encodeObject,
  encodeToken,
  encodeWelcome,
  type ObjectHeader,
} from '../../src/ingest/frames.js';

export const helloFields = { version: PROTOCOL_VERSION, token: 'lwtk_v1.golden', bucket: 'logs' };

export const welcomeFields = {
  version: PROTOCOL_VERSION,
  windowObjects: 512,
  windowBytes: 8 * 1024 * 1024,
  frameBytesMax: 1024 * 1024 + 4096,
  objectBytesMax: 5 * 1024 ** 4,
  tokenExpiresAt: 1_800_000_000_000,
};

export const objectHeader: ObjectHeader = {
  sequence: 7,
  size: 11,
  bucket: 'other',
  key: 'dir/é.txt',
  contentType: 'text/plain',
  metadata: [['origin', 'golden']],
  checksums: [['CRC32C', Uint8Array.of(0xc9, 0x9a, 0x74, 0x78)]],
  idempotencyKey: 'key-1',
  ifMatch: '"abc"',
  ifNoneMatch: true,
};
export const objectBody = new TextEncoder().encode('hello');
export const dataBody = new TextEncoder().encode(' world');

export const ackFields = {
  sequence: 7,
  status: 200,
  refused: false,
  json: { key: 'dir/é.txt', size: 11, etag: '"e"', checksums: { CRC32C: 'yZp0eA==' } },
};

export const goldenFrames: Record<string, Uint8Array> = {
  hello: encodeHello(helloFields),
  welcome: encodeWelcome(welcomeFields),
  object: encodeObject(objectHeader, objectBody),
  data: encodeData(7, dataBody),
  token: encodeToken('lwtk_v1.renewed'),
  ack: encodeAck(ackFields),
  credit: encodeCredit(1024 * 1024),
};
