// Goal: at the quota limit a write that replaces the null version is judged by what it changes,
// as the engine's putObject judges it: in an Unversioned or Suspended bucket the replaced
// version's bytes are freed, so a small overwrite of a large object, a self-copy with
// metadataDirective REPLACE and a signed-URL PUT over an object answer 200, while a new key or a
// write in an Enabled bucket (which replaces nothing) still answers 507 `quota_exceeded`.
// Method: the real service on loopback; maxBytes set to the tenant's usedBytes through the admin
// API, then writes through the public API (bearer PUT, copy, signed-URL PUT) and the quota read
// back. The gateway checks the quota before it reads a body and the engine again in the commit;
// both must subtract the replaced version for these writes to pass.
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { Service, type DataClient, type Problem } from '../helpers/service.js';

const MB = 1_000_000;

interface QuotaAnswer {
  usedBytes: number;
  usedObjects: number;
}

t.test('an overwrite at the quota limit', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const admin = service.adminToken();
  const client = await service.tenant('acme', undefined, admin);
  const quota = async (): Promise<QuotaAnswer> => {
    const { json } = await service.admin('GET', '/tenants/acme/quota', admin);
    const { usedBytes, usedObjects } = json as QuotaAnswer;
    return { usedBytes, usedObjects };
  };
  const clear = async (): Promise<void> => {
    const answer = await service.admin('DELETE', '/tenants/acme/quota', admin);
    if (answer.status !== 204) throw new RangeError(`quota: ${answer.status}`);
  };
  /** Sets maxBytes to what the tenant uses now: any growth is refused. */
  const full = async (): Promise<number> => {
    const { usedBytes } = await quota();
    const answer = await service.admin('PUT', '/tenants/acme/quota', admin, {
      maxBytes: usedBytes,
    });
    if (answer.status !== 200) throw new RangeError(`quota: ${answer.status}`);
    return usedBytes;
  };
  const bucket = async (name: string, versioning?: 'Enabled' | 'Suspended'): Promise<void> => {
    t.equal((await client.request('POST', '/buckets', { json: { name } })).status, 201);
    if (versioning) {
      const path = `/buckets/${name}/versioning`;
      t.equal((await client.request('PUT', path, { json: { status: versioning } })).status, 200);
    }
  };
  const refused = (t: Test, answer: { status: number; json: unknown }, what: string): void => {
    t.equal(answer.status, 507, what);
    t.equal((answer.json as Problem | undefined)?.code, 'quota_exceeded', `${what}: the code`);
  };

  await bucket('plain');
  t.equal((await client.put('plain', 'big', Buffer.alloc(10 * MB))).status, 200);
  t.equal((await client.put('plain', 'small', Buffer.alloc(1000))).status, 200);

  await t.test(
    'unversioned: a smaller PUT over an object passes, a new key does not',
    async (t) => {
      const limit = await full();
      refused(t, await client.put('plain', 'new', Buffer.alloc(1000)), 'a new key');
      refused(t, await client.put('plain', 'small', Buffer.alloc(1001)), 'an overwrite that grows');
      t.equal((await client.put('plain', 'small', Buffer.alloc(1000))).status, 200, 'same size');
      t.equal((await client.put('plain', 'big', Buffer.alloc(1000))).status, 200, 'it frees bytes');
      t.same(await quota(), { usedBytes: limit - 10 * MB + 1000, usedObjects: 2 });
    },
  );

  await t.test('a self-copy with metadataDirective REPLACE at the limit passes', async (t) => {
    await clear();
    t.equal((await client.put('plain', 'big', Buffer.alloc(10 * MB))).status, 200);
    const limit = await full();
    const copy = (target: string, source: string): ReturnType<DataClient['request']> =>
      client.request('POST', `/buckets/plain/object-copy/${target}`, {
        json: {
          sourceBucket: 'plain',
          sourceKey: source,
          metadataDirective: 'REPLACE',
          metadata: { note: 'relabelled' },
        },
      });
    refused(t, await copy('copied', 'small'), 'a copy to a new key');
    let answer = await copy('big', 'big');
    t.equal(answer.status, 200, 'it replaces itself: no growth');
    t.match(answer.json, { key: 'big', size: 10 * MB, metadata: { note: 'relabelled' } });
    answer = await copy('big', 'small');
    t.equal(answer.status, 200, 'a small object copied over a large one frees bytes');
    t.same(await quota(), { usedBytes: limit - 10 * MB + 1000, usedObjects: 2 });
  });

  await t.test('a signed-URL PUT over an object at the limit passes', async (t) => {
    await clear();
    t.equal((await client.put('plain', 'big', Buffer.alloc(10 * MB))).status, 200);
    await full();
    const origin = service.publicUrl.replace(/\/api\/v1$/, '');
    const signedPut = async (key: string): Promise<Response> => {
      const minted = await client.request('POST', '/sign-url', {
        json: { method: 'PUT', bucket: 'plain', key },
      });
      const url = origin + (minted.json as { url: string }).url;
      return fetch(url, { method: 'PUT', body: Buffer.alloc(1000) });
    };
    let response = await signedPut('other');
    t.equal(response.status, 507, 'a signed-URL PUT of a new key past the limit');
    await response.arrayBuffer();
    response = await signedPut('big');
    t.equal(response.status, 200, await response.text());
  });

  await t.test('suspended: the null version is replaced, other versions are not', async (t) => {
    await clear();
    await bucket('paused', 'Enabled');
    t.equal((await client.put('paused', 'kept', Buffer.alloc(MB))).status, 200, 'a version');
    await client.request('PUT', '/buckets/paused/versioning', { json: { status: 'Suspended' } });
    t.equal((await client.put('paused', 'null', Buffer.alloc(MB))).status, 200, 'a null version');
    await full();
    refused(
      t,
      await client.put('paused', 'kept', Buffer.alloc(1000)),
      'a PUT over a key without a null version keeps the old version',
    );
    t.equal(
      (await client.put('paused', 'null', Buffer.alloc(1000))).status,
      200,
      'a PUT over the null version frees its bytes',
    );
  });

  await t.test('enabled: nothing is replaced, so an overwrite grows', async (t) => {
    await clear();
    await bucket('history', 'Enabled');
    t.equal((await client.put('history', 'doc', Buffer.alloc(MB))).status, 200);
    await full();
    refused(t, await client.put('history', 'doc', Buffer.alloc(1000)), 'a new version');
    const copy = await client.request('POST', '/buckets/history/object-copy/doc', {
      json: { sourceBucket: 'history', sourceKey: 'doc', metadataDirective: 'REPLACE' },
    });
    refused(t, copy, 'a self-copy adds a version');
  });

  await t.test(
    'the retry of a write that filled the quota replays, it is not growth',
    async (t) => {
      await clear();
      await bucket('retries', 'Enabled');
      const body = Buffer.alloc(1000, 7);
      const headers = {
        'Idempotency-Key': 'fill-once',
        'X-Service-Checksum-SHA256': createHash('sha256').update(body).digest('base64'),
      };
      const { usedBytes } = await quota();
      const answer = await service.admin('PUT', '/tenants/acme/quota', admin, {
        maxBytes: usedBytes + body.length,
      });
      t.equal(answer.status, 200);
      const first = await client.put('retries', 'once', body, headers);
      t.equal(first.status, 200, 'the write that fills the quota');
      const retry = await client.put('retries', 'once', body, headers);
      t.same([retry.status, retry.json], [200, first.json], 'its retry answers the first result');
      refused(
        t,
        await client.put('retries', 'twice', body, { ...headers, 'Idempotency-Key': 'new' }),
        'a new key is new growth',
      );
    },
  );
});
