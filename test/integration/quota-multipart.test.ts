// Goal: multipart parts count against the tenant's maxBytes from the moment they are uploaded, as
// admin-api.md says: a part past the limit answers 507 `quota_exceeded` and stores nothing; the
// bytes of parts in progress are in the quota's usedBytes (not in the usage report's
// logicalBytes) and count against later PUTs; a part uploaded again under its number replaces
// the old part's bytes; complete moves the parts' bytes into the object without counting them
// twice; abort gives them back. Parts are not objects: maxObjects stops only the complete that
// would add one.
// Method: the real service on loopback; maxBytes set a few MiB above the tenant's use through
// the admin API; parts (random, so nothing deduplicates) uploaded through the public API; the
// quota and the usage report read back after each step.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Service, type DataClient, type Problem } from '../helpers/service.js';

const MiB = 1024 * 1024;

interface QuotaAnswer {
  usedBytes: number;
  usedObjects: number;
}

interface UsageAnswer {
  logicalBytes: number;
  physicalBytes: number;
  objects: number;
}

/**
 * Sends the headers of a PUT of `length` bytes and one byte of its body; resolves with the
 * status the service answers before the rest arrives, rejects when none comes within 60 s (far
 * above an answer on a loaded machine: the service answers from the headers alone).
 */
function statusBeforeBody(url: string, token: string, length: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = { Authorization: `Bearer ${token}`, 'Content-Length': String(length) };
    const request = httpRequest(url, { method: 'PUT', headers }, (answer) => {
      clearTimeout(timer);
      answer.resume();
      resolve(answer.statusCode ?? 0);
      request.destroy();
    });
    const timer = setTimeout(() => {
      reject(new RangeError('waited 60 s for an answer before the body was sent'));
      request.destroy();
    }, 60_000);
    request.on('error', () => undefined);
    request.write(Buffer.alloc(1));
  });
}

t.test('multipart parts and the tenant quota', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const admin = service.adminToken();
  const client = await service.tenant('acme', undefined, admin);
  t.equal((await client.request('POST', '/buckets', { json: { name: 'mpu' } })).status, 201);
  t.equal((await client.put('mpu', 'base', randomBytes(1000))).status, 200);

  const quota = async (): Promise<QuotaAnswer> =>
    (await service.admin('GET', '/tenants/acme/quota', admin)).json as QuotaAnswer;
  const usage = async (): Promise<UsageAnswer> =>
    (await service.admin('GET', '/tenants/acme/usage', admin)).json as UsageAnswer;
  const setQuota = async (body: { maxBytes?: number; maxObjects?: number }): Promise<void> => {
    const answer = await service.admin('PUT', '/tenants/acme/quota', admin, body);
    if (answer.status !== 200) throw new RangeError(`quota: ${answer.status}`);
  };
  const create = async (key: string): Promise<string> => {
    const answer = await client.request('POST', `/buckets/mpu/multipart/${key}`);
    if (answer.status !== 201) throw new RangeError(`create: ${answer.status}`);
    return (answer.json as { uploadId: string }).uploadId;
  };
  const part = (
    key: string,
    uploadId: string,
    partNumber: number,
    body: Buffer,
  ): ReturnType<DataClient['request']> =>
    client.request('PUT', `/buckets/mpu/multipart/${uploadId}/parts/${partNumber}/${key}`, {
      body,
    });
  const complete = (
    key: string,
    uploadId: string,
    parts: Array<{ partNumber: number; etag: string }>,
  ): ReturnType<DataClient['request']> =>
    client.request('POST', `/buckets/mpu/multipart/${uploadId}/complete/${key}`, {
      json: { parts },
    });
  const abort = (key: string, uploadId: string): ReturnType<DataClient['request']> =>
    client.request('DELETE', `/buckets/mpu/multipart/${uploadId}/${key}`);
  const etagOf = (answer: { json: unknown }): string => (answer.json as { etag: string }).etag;
  const codeOf = (answer: { json: unknown }): string | undefined =>
    (answer.json as Problem | undefined)?.code;

  const base = (await quota()).usedBytes;
  t.equal(base, 1000);
  const limit = base + 6 * MiB;
  await setQuota({ maxBytes: limit });

  await t.test('parts count from upload to complete', async (t) => {
    const uploadId = await create('big');
    let answer = await part('big', uploadId, 1, randomBytes(5 * MiB));
    t.equal(answer.status, 200, 'a part within the quota');
    t.equal((await quota()).usedBytes, base + 5 * MiB, 'usedBytes counts the part');
    t.equal((await usage()).logicalBytes, base, 'the usage report counts versions only');
    const physical = (await usage()).physicalBytes;
    t.ok(physical >= base + 5 * MiB, 'the part holds its bytes');

    answer = await part('big', uploadId, 2, randomBytes(5 * MiB));
    t.equal(answer.status, 507, 'a part past maxBytes');
    t.equal(codeOf(answer), 'quota_exceeded');
    const url = `${service.publicUrl}/buckets/mpu/multipart/${uploadId}/parts/2/big`;
    t.equal(
      await statusBeforeBody(url, client.token, 5 * MiB),
      507,
      'the gateway refuses it from Content-Length, before it reads the body',
    );
    t.equal((await usage()).physicalBytes, physical, 'the refused part stored nothing');
    answer = await client.put('mpu', 'other', randomBytes(2 * MiB));
    t.equal(answer.status, 507, 'parts in progress count against a later PUT');

    answer = await part('big', uploadId, 1, randomBytes(5 * MiB));
    t.equal(answer.status, 200, 'a part uploaded again replaces the old part');
    const first = etagOf(answer);
    t.equal((await quota()).usedBytes, base + 5 * MiB, 'its bytes replaced, not added');
    answer = await part('big', uploadId, 2, randomBytes(MiB));
    t.equal(answer.status, 200, 'a part that fills the quota exactly');
    const second = etagOf(answer);
    t.equal((await quota()).usedBytes, limit);
    t.equal((await part('big', uploadId, 3, randomBytes(1))).status, 507, 'one byte more');

    answer = await complete('big', uploadId, [
      { partNumber: 1, etag: first },
      { partNumber: 2, etag: second },
    ]);
    t.equal(answer.status, 200, 'complete at the limit: it adds no bytes');
    t.same(await quota(), {
      tenantId: 'acme',
      maxBytes: limit,
      usedBytes: limit,
      usedObjects: 2,
    });
    t.match(await usage(), { logicalBytes: limit, objects: 2 }, 'counted once, as the object');
  });

  await t.test('abort gives the bytes back', async (t) => {
    t.equal((await client.request('DELETE', '/buckets/mpu/objects/big')).status, 204);
    t.equal((await quota()).usedBytes, base);
    const physical = (await usage()).physicalBytes;
    const uploadId = await create('dropped');
    t.equal((await part('dropped', uploadId, 1, randomBytes(5 * MiB))).status, 200);
    t.equal((await part('dropped', uploadId, 2, randomBytes(MiB))).status, 200);
    t.equal((await quota()).usedBytes, limit);
    t.equal((await abort('dropped', uploadId)).status, 204);
    t.equal((await quota()).usedBytes, base, 'nothing is left counted');
    t.equal((await usage()).physicalBytes, physical, 'nor held');
    t.equal((await client.put('mpu', 'other', randomBytes(2 * MiB))).status, 200, 'room again');
    t.equal((await client.request('DELETE', '/buckets/mpu/objects/other')).status, 204);
  });

  await t.test('maxObjects: parts are not objects, complete adds one', async (t) => {
    await setQuota({ maxObjects: 1 });
    const fresh = await create('fresh');
    let answer = await part('fresh', fresh, 1, randomBytes(1000));
    t.equal(answer.status, 200, 'a part of a new key at maxObjects');
    answer = await complete('fresh', fresh, [{ partNumber: 1, etag: etagOf(answer) }]);
    t.equal(answer.status, 507, 'its complete would add an object');
    t.equal(codeOf(answer), 'quota_exceeded');
    const over = await create('base');
    answer = await part('base', over, 1, randomBytes(1000));
    answer = await complete('base', over, [{ partNumber: 1, etag: etagOf(answer) }]);
    t.equal(answer.status, 200, 'a complete over an existing key adds none');
    t.equal((await abort('fresh', fresh)).status, 204);
    t.match(await quota(), { usedBytes: 1000, usedObjects: 1 });
  });
});
