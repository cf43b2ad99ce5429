// Goal: the cluster routes on a single node: membership lists this node as the only voter and
// leader; join, drain, remove and replace validate bodies and role and answer 409 `conflict`
// (not clustered); rebalance validates its body, gives a dry-run plan that reads nothing, and
// otherwise scrubs the tenant's or bucket's chunks through the engine, reporting what it verified
// and exactly which chunks are corrupt.
// Method: the real service on loopback; objects written through the public API; then bytes of
// two stored records flipped on disk (one payload, one header), found through the index opened
// read-only from the test, and the rebalance report compared with what was damaged; GETs of the
// damaged objects answer a 500 problem object and none of their bytes.
import t from 'tap';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Service, type Problem } from '../helpers/service.js';
import { call, mintToken } from './admin-testing.js';
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

/** The counts of a rebalance answer that these tests compare; t.match checks the rest. */
interface RepairCounts {
  chunkRefs: number;
  chunksVerified: number;
  bytesVerified: number;
  corruptChunks: number;
}

const joinBody = { id: 'node-2', address: '10.0.0.2:9002', reason: 'grow', confirm: 'node-2' };
const bodies: Record<string, Record<string, unknown>> = {
  join: joinBody,
  drain: { id: 'node-2', reason: 'maintenance', confirm: 'node-2', forceLost: false },
  remove: { id: 'node-2', reason: 'gone', confirm: 'node-2' },
  replace: {
    oldId: 'node-2',
    id: 'node-3',
    address: '10.0.0.3:9002',
    reason: 'disk died',
    confirm: 'node-2',
  },
};

t.test('cluster routes on one node', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const [owner, operator, viewer] = await Promise.all([
    mintToken(service, 'owner'),
    mintToken(service, 'operator'),
    mintToken(service, 'viewer'),
  ]);

  await t.test('membership', async (t) => {
    const answer = await call(service, 'GET', '/cluster/consensus/membership', {
      token: viewer.token,
    });
    t.equal(answer.status, 200);
    const membership = answer.json as { members: Array<{ id: string }>; leaderId: string };
    t.equal(membership.members.length, 1);
    const [member] = membership.members;
    t.match(member, {
      id: /^node-[0-9a-f]{16}$/,
      name: String,
      address: `127.0.0.1:${service.adminPort}`,
      state: 'voter',
    });
    t.equal(membership.leaderId, member?.id, 'the only voter leads');
  });

  await t.test('membership changes: validated, then 409 not clustered', async (t) => {
    for (const [name, body] of Object.entries(bodies)) {
      const path = `/cluster/consensus/${name}`;
      t.equal(
        (await call(service, 'POST', path, { token: operator.token, body })).status,
        403,
        `${name} needs owner`,
      );
      let answer = await call(service, 'POST', path, { token: owner.token, body });
      t.equal(answer.status, 409, name);
      t.equal((answer.json as Problem).code, 'conflict');
      t.match((answer.json as Problem).message, /not clustered/);
      t.equal(
        (await call(service, 'POST', `${path}?dryRun=true`, { token: owner.token, body })).status,
        409,
        `${name} dry run`,
      );
      for (const field of Object.keys(body).filter((key) => key !== 'forceLost')) {
        const { [field]: _dropped, ...rest } = body;
        answer = await call(service, 'POST', path, { token: owner.token, body: rest });
        t.equal(answer.status, 400, `${name} without ${field}`);
      }
      answer = await call(service, 'POST', path, {
        token: owner.token,
        body: { ...body, confirm: 'someone-else' },
      });
      t.equal(answer.status, 400, `${name} with a wrong confirm`);
    }
    t.equal(
      (
        await call(service, 'POST', '/cluster/consensus/drain', {
          token: owner.token,
          body: { ...bodies['drain'], forceLost: 'yes' },
        })
      ).status,
      400,
      'forceLost is a boolean',
    );
    t.equal(
      (
        await call(service, 'POST', '/cluster/consensus/join', {
          token: owner.token,
          body: { ...joinBody, zone: 7 },
        })
      ).status,
      400,
      'zone is a string',
    );
  });

  const client = await service.tenant('acme', 'read,write,delete,admin', owner.token);
  t.equal((await client.request('POST', '/buckets', { json: { name: 'logs' } })).status, 201);
  t.equal((await client.request('POST', '/buckets', { json: { name: 'media' } })).status, 201);
  for (let index = 0; index < 5; index += 1)
    t.equal((await client.put('logs', `log-${index}`, `line ${index}\n`.repeat(100))).status, 200);
  t.equal((await client.put('media', 'clip', Buffer.alloc(50_000, 7))).status, 200);
  const rebalance = (body: Record<string, unknown>, query = ''): ReturnType<typeof call> =>
    call(service, 'POST', `/cluster/repair/rebalance${query}`, { token: owner.token, body });
  const countsOf = (json: unknown): RepairCounts => (json as { counts: RepairCounts }).counts;
  const whole = { tenantId: 'acme', reason: 'scrub', confirmTenant: 'acme' };

  await t.test('rebalance: validation and dry run', async (t) => {
    t.equal(
      (
        await call(service, 'POST', '/cluster/repair/rebalance', {
          token: operator.token,
          body: whole,
        })
      ).status,
      403,
      'needs owner',
    );
    t.equal((await rebalance({ ...whole, reason: undefined })).status, 400, 'reason required');
    t.equal(
      (await rebalance({ ...whole, confirmTenant: 'acm' })).status,
      400,
      'confirmTenant must equal tenantId',
    );
    t.equal(
      (await rebalance({ ...whole, bucketName: 'logs' })).status,
      400,
      'confirmBucket must equal bucketName',
    );
    t.equal(
      (await rebalance({ ...whole, confirmBucket: 'logs' })).status,
      400,
      'confirmBucket without bucketName',
    );
    t.equal(
      (await rebalance({ tenantId: 'nobody', reason: 'r', confirmTenant: 'nobody' })).status,
      404,
    );
    t.equal((await rebalance({ ...whole, bucketName: 'none', confirmBucket: 'none' })).status, 404);
    const answer = await rebalance(whole, '?dryRun=true');
    t.equal(answer.status, 200);
    t.match(answer.json, {
      dryRun: true,
      action: 'rebalanceRepair',
      target: 'tenants/acme',
      mode: 'single-node-scrub',
      complete: true,
      blockers: [],
      counts: { buckets: 2, versions: 6, chunksVerified: 0, bytesVerified: 0 },
      corrupt: [],
    });
    t.ok(countsOf(answer.json).chunkRefs >= 6);
  });

  await t.test('rebalance: verifies every chunk and reports the corrupt ones', async (t) => {
    let answer = await rebalance(whole);
    t.equal(answer.status, 200);
    t.match(answer.json, {
      dryRun: false,
      applied: true,
      complete: true,
      counts: { buckets: 2, versions: 6, corruptChunks: 0 },
      corrupt: [],
    });
    t.ok(
      countsOf(answer.json).chunksVerified >= 6 && countsOf(answer.json).bytesVerified > 0,
      'chunks were read and verified',
    );

    const damaged = await damage(service.dataDir, [
      ['logs', 'log-3', RECORD_HEADER_SIZE + 2],
      ['media', 'clip', 20],
    ]);
    answer = await rebalance(whole);
    t.equal(countsOf(answer.json).corruptChunks, 2);
    t.match((answer.json as { corrupt: unknown }).corrupt, [
      {
        bucket: 'logs',
        key: 'log-3',
        chunkIndex: 0,
        chunkId: damaged[0],
        problem: 'payload_checksum_mismatch',
        segmentId: Number,
        offset: Number,
      },
      {
        bucket: 'media',
        key: 'clip',
        chunkIndex: 0,
        chunkId: damaged[1],
        problem: 'record_header_corrupt',
      },
    ]);
    answer = await rebalance({ ...whole, bucketName: 'logs', confirmBucket: 'logs' });
    t.match(answer.json, {
      target: 'tenants/acme/buckets/logs',
      counts: { buckets: 1, versions: 5, corruptChunks: 1 },
      corrupt: [{ key: 'log-3' }],
    });
    // Reading a damaged object fails whole, with nothing of it sent; twice each, so that the
    // second read is the gateway's synchronous one (its segment is open by then).
    for (const [bucket, key] of [
      ['logs', 'log-3'],
      ['media', 'clip'],
      ['logs', 'log-3'],
      ['media', 'clip'],
    ] as const) {
      const read = await client.get(bucket, key);
      t.equal(read.status, 500, `${key}: 500`);
      // A problem object and nothing else (internal conditions are not detailed to clients).
      t.match(read.json, { status: 500, code: 'internal' }, `${key}: a problem object`);
    }
    const intact = await client.get('logs', 'log-2');
    t.equal(intact.bytes.toString(), 'line 2\n'.repeat(100), 'an intact neighbour reads back');
  });
});

/** Flips one byte of the first chunk record of each (bucket, key) at `at`; returns chunk ids. */
async function damage(
  dataDir: string,
  targets: ReadonlyArray<[string, string, number]>,
): Promise<string[]> {
  const store = IndexStore.open({ path: join(dataDir, 'index'), readOnly: true });
  try {
    const tenant = store.get<TenantRecord>(DB.tenants, tenantKey('acme')) as TenantRecord;
    const ids: string[] = [];
    for (const [bucketName, key, at] of targets) {
      const bucket = store.get<BucketRecord>(
        DB.buckets,
        tenantChildKey('acme', bucketName),
      ) as BucketRecord;
      const version = store.get<ObjectVersionRecord>(
        DB.objects,
        objectKey(bucket.id, key),
      ) as ObjectVersionRecord;
      const [ref] = unpackChunkRefs(Buffer.from(version.chunks));
      const chunk = store.get<ChunkRecord>(
        DB.chunks,
        chunkKey(tenant.num, (ref as { id: Buffer }).id),
      ) as ChunkRecord;
      const file = await open(join(dataDir, 'segments', segmentFileName(chunk.segmentId)), 'r+');
      const byte = Buffer.alloc(1);
      await file.read(byte, 0, 1, chunk.offset + at);
      byte.writeUInt8(byte.readUInt8(0) ^ 0xff, 0);
      await file.write(byte, 0, 1, chunk.offset + at);
      await file.close();
      ids.push((ref as { id: Buffer }).id.toString('hex'));
    }
    return ids;
  } finally {
    await store.close();
  }
}
