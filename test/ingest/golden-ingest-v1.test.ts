// Goal: version 1 of the ingest protocol keeps its bytes: the committed golden files
// (test/golden/ingest-v1/, one per frame type) decode to the fields they were written from, and
// the encoders still produce exactly those files.
// Method: decode each file with the codec and compare with the fixtures; encode the fixtures and
// compare bytes; pin a few bytes by hand (type, a big-endian length, the sequence).

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  decodeClientFrame,
  decodeServerFrame,
  FRAME_ACK,
  FRAME_OBJECT,
} from '../../src/ingest/frames.js';
import { repoRoot } from '../golden/golden-dir.js';
import {
  ackFields,
  dataBody,
  goldenFrames,
  helloFields,
  objectBody,
  objectHeader,
  welcomeFields,
} from './frame-fixtures.js';

const directory = join(repoRoot(), 'test', 'golden', 'ingest-v1');
const golden = (name: string): Buffer => readFileSync(join(directory, `${name}.bin`));

t.test('the encoders produce the golden bytes', async (t) => {
  for (const [name, bytes] of Object.entries(goldenFrames))
    t.same(Buffer.from(bytes), golden(name), `${name}.bin`);
});

t.test('the golden files decode to their fields', async (t) => {
  t.same(decodeClientFrame(golden('hello')), { type: 0x01, ...helloFields });
  t.same(decodeServerFrame(golden('welcome')), { type: 0x81, ...welcomeFields });
  const object = decodeClientFrame(golden('object'));
  t.equal(object.type, FRAME_OBJECT);
  if (object.type === FRAME_OBJECT) {
    const { body, ...header } = object;
    t.same(Buffer.from(body), Buffer.from(objectBody));
    t.same(
      { ...header, checksums: header.checksums.map(([alg, d]) => [alg, Buffer.from(d)]) },
      {
        type: FRAME_OBJECT,
        ...objectHeader,
        checksums: objectHeader.checksums.map(([alg, d]) => [alg, Buffer.from(d)]),
      },
    );
  }
  const data = decodeClientFrame(golden('data'));
  t.match(data, { type: 0x03, sequence: 7 });
  if (data.type === 0x03) t.same(Buffer.from(data.body), Buffer.from(dataBody));
  t.same(decodeClientFrame(golden('token')), { type: 0x04, token: 'lwtk_v1.renewed' });
  t.same(decodeServerFrame(golden('ack')), { type: FRAME_ACK, ...ackFields });
  t.same(decodeServerFrame(golden('credit')), { type: 0x83, bytes: 1024 * 1024 });
});

t.test('bytes pinned by hand', async (t) => {
  const object = golden('object');
  t.equal(object[0], 0x02, 'type');
  t.equal(object[1], 0x01, 'If-None-Match flag');
  t.equal(object.readUInt16BE(2), Buffer.byteLength('dir/é.txt'), 'key length, big-endian');
  t.equal(object.readBigUInt64BE(4), 7n, 'sequence');
  t.equal(object.readBigUInt64BE(12), 11n, 'size');
  t.equal(golden('welcome').readUInt32BE(8), 8 * 1024 * 1024, 'window bytes');
  t.equal(golden('ack').readUInt16BE(2), 200, 'status');
});
