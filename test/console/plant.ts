// Plants a bad chunk for the scrub tests: flips one payload byte of the first chunk record of an
// object on disk, found through the index opened read-only (the service keeps running).

import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  tenantKey,
  tenantChildKey,
  objectKey,
  chunkKey,
  type TenantRecord,
  type BucketRecord,
  type ObjectVersionRecord,
  type ChunkRecord,
} from '../../src/engine/index/schema.js';
import { unpackChunkRefs } from '../../src/engine/ops/objects.js';
import { segmentFileName } from '../../src/format/segment-header.js';
import { RECORD_HEADER_SIZE } from '../../src/format/record-frame.js';

/** Flips a payload byte of the first chunk of `key`; returns the chunk id (hex). */
export async function plantBadChunk(
  dataDir: string,
  tenantId: string,
  bucketName: string,
  key: string,
): Promise<string> {
  const store = IndexStore.open({ path: join(dataDir, 'index'), readOnly: true });
  try {
    const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(tenantId))!;
    const bucket = store.get<BucketRecord>(DB.buckets, tenantChildKey(tenantId, bucketName))!;
    const version = store.get<ObjectVersionRecord>(DB.objects, objectKey(bucket.id, key))!;
    const [ref] = unpackChunkRefs(Buffer.from(version.chunks));
    const chunk = store.get<ChunkRecord>(DB.chunks, chunkKey(tenant.num, ref!.id))!;
    const path = join(dataDir, 'segments', segmentFileName(chunk.segmentId));
    const file = await open(path, 'r+');
    try {
      const at = chunk.offset + RECORD_HEADER_SIZE + 4;
      const byte = Buffer.alloc(1);
      await file.read(byte, 0, 1, at);
      byte.writeUInt8(byte.readUInt8(0) ^ 0xff, 0);
      await file.write(byte, 0, 1, at);
    } finally {
      await file.close();
    }
    return ref!.id.toString('hex');
  } finally {
    await store.close();
  }
}
