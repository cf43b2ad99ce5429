// Goal: quotas (set, read with usage, clear; validation; dry runs; enforced on the data plane),
// the usage report (totals and per bucket: logical and physical bytes, objects, versions, delete
// markers) and the audit query (newest first, limit clamped to 1..1000, since as a duration,
// tenant filter, scoped tokens forced to their tenant, rows of both planes, requestId equal to
// X-Request-Id, mutation rows committed with the mutation, rows of reads and refusals on both
// planes readable as soon as they are answered) work as admin-api.md and
// DECISIONS.md say.
// Method: the real service on loopback; objects written through the public API; the admin API
// read back and compared with what was written.
import t, { type Test } from 'tap';
import { Service, type Problem } from '../helpers/service.js';
import { call, mintToken, waitFor, type UsageAnswer } from './admin-testing.js';

/** The fields of an audit page that these tests read; t.match checks the rest. */
interface AuditPage {
  events: Array<{ id: string; requestId: string; time: string; tenantId: string }>;
}

t.test('quotas, usage and audit', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const [owner, operator, viewer, scoped] = await Promise.all([
    mintToken(service, 'owner'),
    mintToken(service, 'operator'),
    mintToken(service, 'viewer'),
    mintToken(service, 'viewer', ['--tenant', 'acme']),
  ]);
  const client = await service.tenant('acme', 'read,write,delete,admin', owner.token);
  await service.tenant('other', 'read,write', owner.token);

  await t.test('quota: read, set, clear, validate, dry run, enforcement', async (t) => {
    let answer = await call(service, 'GET', '/tenants/acme/quota', { token: viewer.token });
    t.same(answer.json, { tenantId: 'acme', usedBytes: 0, usedObjects: 0 }, 'no limits at first');
    answer = await call(service, 'PUT', '/tenants/acme/quota?dryRun=true', {
      token: operator.token,
      body: { maxBytes: 10 },
    });
    t.match(answer.json, { dryRun: true, counts: { quotas: 1 }, result: { maxBytes: 10 } });
    t.notOk(
      'maxBytes' in
        ((await call(service, 'GET', '/tenants/acme/quota', { token: viewer.token }))
          .json as object),
      'a dry run sets nothing',
    );
    for (const body of [
      { maxBytes: -1 },
      { maxBytes: 1.5 },
      { maxObjects: '10' },
      { maxbytes: 10 },
    ]) {
      t.equal(
        (await call(service, 'PUT', '/tenants/acme/quota', { token: operator.token, body })).status,
        400,
        JSON.stringify(body),
      );
    }
    answer = await call(service, 'PUT', '/tenants/acme/quota', {
      token: operator.token,
      body: { maxBytes: 1000, maxObjects: 2 },
    });
    t.equal(answer.status, 200);
    t.same(answer.json, {
      tenantId: 'acme',
      maxBytes: 1000,
      maxObjects: 2,
      usedBytes: 0,
      usedObjects: 0,
    });
    t.equal((await client.request('POST', '/buckets', { json: { name: 'data' } })).status, 201);
    t.equal((await client.put('data', 'one', Buffer.alloc(600))).status, 200);
    let response = await client.put('data', 'two', Buffer.alloc(600));
    t.equal(response.status, 507, 'a write past maxBytes is refused');
    t.equal((response.json as Problem).code, 'quota_exceeded');
    t.equal((await client.put('data', 'two', Buffer.alloc(100))).status, 200);
    t.equal(
      (await client.put('data', 'three', Buffer.alloc(1))).status,
      507,
      'a write past maxObjects is refused',
    );
    answer = await call(service, 'GET', '/tenants/acme/quota', { token: viewer.token });
    t.same(answer.json, {
      tenantId: 'acme',
      maxBytes: 1000,
      maxObjects: 2,
      usedBytes: 700,
      usedObjects: 2,
    });
    answer = await call(service, 'DELETE', '/tenants/acme/quota?dryRun=true', {
      token: operator.token,
    });
    t.match(answer.json, { dryRun: true, result: { cleared: true } });
    t.equal(
      (
        (await call(service, 'GET', '/tenants/acme/quota', { token: viewer.token })).json as {
          maxBytes?: number;
        }
      ).maxBytes,
      1000,
      'a dry run clears nothing',
    );
    // The clear takes an optional reason, and refuses other fields as every mutation does.
    answer = await call(service, 'DELETE', '/tenants/acme/quota', {
      token: operator.token,
      body: { reasn: 'typo' },
    });
    t.match(answer, { status: 400, json: { code: 'bad_request', message: /unknown field/ } });
    t.match(
      (await call(service, 'GET', '/tenants/acme/quota', { token: viewer.token })).json,
      { maxBytes: 1000 },
      'a refused clear clears nothing',
    );
    answer = await call(service, 'DELETE', '/tenants/acme/quota', {
      token: operator.token,
      body: { reason: 'contract renewed' },
    });
    t.equal(answer.status, 204);
    const cleared = (
      (await call(service, 'GET', '/audit?tenant=acme&limit=5', { token: viewer.token }))
        .json as AuditPage
    ).events.find((event) => event.requestId === answer.headers.get('x-request-id'));
    t.match(cleared, { action: 'deleteTenantQuota', reason: 'contract renewed', status: 204 });
    t.same((await call(service, 'GET', '/tenants/acme/quota', { token: viewer.token })).json, {
      tenantId: 'acme',
      usedBytes: 700,
      usedObjects: 2,
    });
    response = await client.put('data', 'three', Buffer.alloc(600));
    t.equal(response.status, 200, 'no limit once cleared');

    // A PUT replaces the quota: `{}` lifts both limits; a PUT without a body is refused.
    const set = { token: operator.token, body: { maxBytes: 1, maxObjects: 1 } };
    t.equal((await call(service, 'PUT', '/tenants/acme/quota', set)).status, 200);
    const bare = await fetch(`${service.adminUrl}/tenants/acme/quota`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${operator.token}` },
    });
    t.equal(bare.status, 400, 'no body');
    t.match(await bare.json(), { code: 'bad_request', message: /must be a JSON object/ });
    answer = await call(service, 'GET', '/tenants/acme/quota', { token: viewer.token });
    t.match(answer.json, { maxBytes: 1, maxObjects: 1 }, 'the refused PUT changed nothing');
    answer = await call(service, 'PUT', '/tenants/acme/quota', { token: operator.token, body: {} });
    t.equal(answer.status, 200, '{}');
    answer = await call(service, 'GET', '/tenants/acme/quota', { token: viewer.token });
    t.notOk('maxBytes' in (answer.json as object), 'no byte limit');
    t.notOk('maxObjects' in (answer.json as object), 'no object limit');
  });

  await t.test('usage: totals and per bucket', async (t) => {
    t.equal(
      (
        await client.request('POST', '/buckets', {
          json: { name: 'history', versioning: 'Enabled' },
        })
      ).status,
      201,
    );
    for (const body of ['12345', '1234567890'])
      t.equal((await client.put('history', 'doc', body)).status, 200);
    t.equal((await client.put('history', 'gone', 'xyz')).status, 200);
    t.equal((await client.request('DELETE', '/buckets/history/objects/gone')).status, 204);
    const answer = await call(service, 'GET', '/tenants/acme/usage', { token: viewer.token });
    t.equal(answer.status, 200);
    t.match(answer.json, {
      tenantId: 'acme',
      logicalBytes: 700 + 600 + 5 + 10 + 3,
      objects: 4,
      versions: 6,
      deleteMarkers: 1,
    });
    const usage = answer.json as UsageAnswer & {
      logicalBytes: number;
      buckets: Array<{ name: string }>;
    };
    t.ok(usage.physicalBytes > 0, 'physical bytes after dedup and compression');
    t.ok(usage.physicalBytes < usage.logicalBytes, 'zero-filled bodies deduplicate and compress');
    const byName = Object.fromEntries(usage.buckets.map((bucket) => [bucket.name, bucket]));
    t.match(byName['data'], { name: 'data', logicalBytes: 1300, objects: 3, versions: 3 });
    t.match(byName['history'], {
      name: 'history',
      logicalBytes: 18,
      objects: 1,
      versions: 3,
      deleteMarkers: 1,
    });
  });

  /**
   * Five rounds of `requests`, each followed at once by an audit query: their statuses are
   * `statuses`, and every one of their rows is in the query's answer.
   */
  const readableAtOnce = async (
    t: Test,
    requests: () => Promise<Array<{ status: number; headers: Headers }>>,
    statuses: number[],
    limit: number,
  ): Promise<void> => {
    for (let round = 0; round < 5; round += 1) {
      const answers = await requests();
      t.same(
        answers.map((answer) => answer.status),
        statuses,
      );
      const { events } = (
        await call(service, 'GET', `/audit?limit=${limit}`, { token: owner.token })
      ).json as AuditPage;
      const seen = new Set(events.map((event) => event.requestId));
      t.ok(
        answers.every((answer) => seen.has(answer.headers.get('x-request-id') ?? '')),
        `round ${round}: every row is there`,
      );
    }
  };

  await t.test('audit: reads and refusals are readable as soon as they are answered', async (t) => {
    // Their rows are batched, unlike a mutation's; the query must still see every admin request
    // answered before it (admin-api.md §1: every request, successful or denied, writes a row).
    await readableAtOnce(
      t,
      async () => [
        await call(service, 'GET', '/tenants/acme', { token: viewer.token }),
        await call(service, 'GET', '/tenants'),
        await call(service, 'POST', '/tenants', { token: viewer.token, body: { id: 'nope' } }),
      ],
      [200, 401, 403],
      20,
    );
  });

  await t.test('audit: data-plane reads and refusals are readable at once', async (t) => {
    // The gateway sends its rows in the next turn of its event loop, which may come after the
    // query; the query first passes a barrier through the engine, which has every listener send
    // the rows it holds: a query right after the response finds the row.
    await readableAtOnce(
      t,
      async () => [
        await client.request('GET', '/buckets'),
        await client.request('GET', '/buckets/none/objects/x'),
        await client.request('GET', '/buckets', { headers: { Authorization: 'Bearer lwtk_x' } }),
      ],
      [200, 404, 401],
      50,
    );
  });

  await t.test('audit: order, limit, since, tenant, scope, request ids, both planes', async (t) => {
    const created = await call(service, 'POST', '/tenants', {
      token: owner.token,
      body: { id: 'fresh' },
    });
    // A mutation's row commits with the mutation: visible at once, no batching delay.
    let answer = await call(service, 'GET', '/audit?tenant=fresh', { token: viewer.token });
    t.match((answer.json as AuditPage).events[0], {
      requestId: created.headers.get('x-request-id'),
      action: 'createTenant',
      tenantId: 'fresh',
      outcome: 'allowed',
      status: 201,
      actor: `admin:${owner.tokenId}`,
    });
    const read = await client.request('GET', '/buckets');
    const dataRow = await waitFor('the data-plane row', async () => {
      const { events } = (
        await call(service, 'GET', '/audit?tenant=acme&limit=1000', { token: viewer.token })
      ).json as AuditPage;
      return events.find((event) => event.requestId === read.headers.get('x-request-id'));
    });
    t.match(dataRow, {
      action: 'listBuckets',
      tenantId: 'acme',
      actor: client.accessKeyId,
      outcome: 'allowed',
      status: 200,
      time: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/,
    });

    answer = await call(service, 'GET', '/audit', { token: viewer.token });
    const { events } = answer.json as AuditPage;
    t.ok(events.length > 10 && events.length <= 100);
    t.ok(
      events.every(
        (event, index) => index === 0 || event.time <= (events[index - 1] as { time: string }).time,
      ),
      'newest first',
    );
    t.equal(
      ((await call(service, 'GET', '/audit?limit=0', { token: viewer.token })).json as AuditPage)
        .events.length,
      1,
      'limit clamped up to 1',
    );
    t.equal(
      ((await call(service, 'GET', '/audit?limit=-5', { token: viewer.token })).json as AuditPage)
        .events.length,
      1,
    );
    // The served contract agrees: a limit outside 1..1000 is clamped, so it is not invalid.
    const document = (await call(service, 'GET', '/openapi.json')).json as {
      paths: Record<string, { get: { parameters: Array<{ name: string; schema: object }> } }>;
    };
    const limit = document.paths['/audit']?.get.parameters.find(
      (parameter) => parameter.name === 'limit',
    );
    t.match(limit?.schema, { type: 'integer', default: 100 });
    t.notOk(limit && ('minimum' in limit.schema || 'maximum' in limit.schema), 'limit not bounded');
    t.equal(
      ((await call(service, 'GET', '/audit?limit=3', { token: viewer.token })).json as AuditPage)
        .events.length,
      3,
    );
    t.equal(
      ((await call(service, 'GET', '/audit?limit=2.5', { token: viewer.token })).json as AuditPage)
        .events.length,
      2,
      'a fraction reads as its integer part',
    );
    for (const text of ['0x10', 'Infinity', '1e2', 'abc', '1_000']) {
      const refused = await call(service, 'GET', `/audit?limit=${text}`, { token: viewer.token });
      t.match(refused, { status: 400, json: { code: 'bad_request' } }, `limit=${text}`);
    }
    // More than 1000 rows: unauthenticated health checks are audited too.
    for (let round = 0; round < 55; round += 1) {
      await Promise.all(
        Array.from({ length: 20 }, () =>
          fetch(`${service.adminUrl}/healthz`).then((response) => response.text()),
        ),
      );
    }
    const many = await waitFor('1000 rows', async () => {
      const count = (
        (await call(service, 'GET', '/audit?limit=5000', { token: viewer.token })).json as AuditPage
      ).events.length;
      return count >= 1000 ? count : undefined;
    });
    t.equal(many, 1000, 'limit clamped down to 1000');
    t.equal(
      ((await call(service, 'GET', '/audit', { token: viewer.token })).json as AuditPage).events
        .length,
      100,
      'default limit 100',
    );
    t.equal((await call(service, 'GET', '/audit?limit=ten', { token: viewer.token })).status, 400);
    t.equal(
      ((await call(service, 'GET', '/audit?limit=2.7', { token: viewer.token })).json as AuditPage)
        .events.length,
      2,
      'a fractional limit is cut to its whole part',
    );
    for (const since of ['1.5h', '90us', '2h45m', '0', '%2B1h', '2562047h47m16.854775807s'])
      t.equal(
        (await call(service, 'GET', `/audit?since=${since}`, { token: viewer.token })).status,
        200,
        `since=${since} (Go's duration syntax)`,
      );
    // Refused: not a duration, negative, or past Go's longest (2^63-1 ns).
    for (const since of ['yesterday', '-1h', '9999999999h', '2562047h47m16.854775808s'])
      t.equal(
        (await call(service, 'GET', `/audit?since=${since}`, { token: viewer.token })).status,
        400,
        `since=${since}`,
      );
    t.equal(
      (await call(service, 'GET', '/audit?tenant=NOT%20A%20TENANT', { token: viewer.token }))
        .status,
      400,
    );
    t.ok(
      ((await call(service, 'GET', '/audit?since=1h', { token: viewer.token })).json as AuditPage)
        .events.length > 0,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    const recent = (
      (await call(service, 'GET', '/audit?since=200ms&limit=1000', { token: viewer.token }))
        .json as AuditPage
    ).events;
    t.ok(
      recent.every((event) => Date.parse(event.time) >= Date.now() - 2000),
      'since keeps only recent events',
    );
    t.ok(recent.length < many, 'since drops older events');

    const other = (
      (await call(service, 'GET', '/audit?tenant=other&limit=1000', { token: viewer.token }))
        .json as AuditPage
    ).events;
    t.ok(other.length > 0 && other.every((event) => event.tenantId === 'other'), 'tenant filter');
    const forced = (
      (await call(service, 'GET', '/audit?limit=1000', { token: scoped.token })).json as AuditPage
    ).events;
    t.ok(
      forced.length > 0 && forced.every((event) => event.tenantId === 'acme'),
      'a scoped token sees only its tenant',
    );
    t.equal(
      (await call(service, 'GET', '/audit?tenant=acme', { token: scoped.token })).status,
      200,
    );
    t.equal(
      (await call(service, 'GET', '/audit?tenant=other', { token: scoped.token })).status,
      403,
      'explicit other tenant: 403',
    );
    t.equal(
      (await call(service, 'GET', '/audit?tenant=NOT%20A%20TENANT', { token: scoped.token }))
        .status,
      403,
      'any other tenant name from a scoped token: 403, as on the tenant paths',
    );
  });
});
