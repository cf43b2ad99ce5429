// Goal: the tenant lifecycle of admin-api.md §3 and §4 works as a new user would try it:
// create (201, 409 on a taken id, 400 on a bad id), list and get; disable (owner, reason
// required, revokes the tenant's keys in the same transaction, data-plane tokens stop at once);
// delete (owner, reason, confirm = id, only a disabled tenant (409), 412 while a version is under
// legal hold or retention, then everything goes and the tenant shows as deleted); every
// mutation's `?dryRun=true` returns the plan, applies nothing, and is audited as a dry run;
// names, reasons and external references with a control character are refused and change
// nothing.
// Method: the real service on loopback; data written through the public API (buckets, objects,
// versions, delete markers, object lock); then the admin API, checked against both listeners.
import t from 'tap';
import { Service, type DataClient, type Problem } from '../helpers/service.js';
import {
  call,
  mintToken,
  waitFor,
  auditRowOf,
  mintBearer,
  type TenantAnswer,
  type TenantList,
  type UsageAnswer,
} from './admin-testing.js';

t.test('tenant lifecycle', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const owner = (await mintToken(service, 'owner')).token;
  const operator = (await mintToken(service, 'operator')).token;

  await t.test('create, list, get', async (t) => {
    let answer = await call(service, 'POST', '/tenants', {
      token: operator,
      body: { id: 'acme', name: 'Acme Corp' },
    });
    t.equal(answer.status, 201);
    t.match(answer.json, {
      id: 'acme',
      name: 'Acme Corp',
      state: 'active',
      createdAt: /^\d{4}-\d\d-\d\dT/,
    });
    t.equal(
      (
        (await call(service, 'POST', '/tenants', { token: operator, body: { id: 'acme' } }))
          .json as Problem
      ).code,
      'conflict',
    );
    for (const id of ['ab', 'Upper', 'a_b', 'x'.repeat(64)]) {
      t.equal(
        (await call(service, 'POST', '/tenants', { token: operator, body: { id } })).status,
        400,
        `bad id ${id}`,
      );
    }
    t.equal(
      (await call(service, 'POST', '/tenants', { token: operator, raw: '{not json' })).status,
      400,
      'malformed JSON',
    );
    answer = await call(service, 'POST', '/tenants?dryRun=true', {
      token: operator,
      body: { id: 'ghost' },
    });
    t.equal(answer.status, 200);
    t.match(answer.json, {
      dryRun: true,
      applied: false,
      action: 'createTenant',
      target: 'tenants/ghost',
      counts: {
        tenants: 1,
        buckets: 0,
        objects: 0,
        versions: 0,
        deleteMarkers: 0,
        legalHeldVersions: 0,
        retainedVersions: 0,
        accessKeys: 0,
        physicalBytes: 0,
      },
      blockers: [],
      result: { id: 'ghost', state: 'active' },
    });
    t.equal(
      (await call(service, 'GET', '/tenants/ghost', { token: owner })).status,
      404,
      'a dry run creates nothing',
    );
    const row = await auditRowOf(service, owner, answer.headers.get('x-request-id') ?? '');
    t.match(
      row,
      { action: 'createTenant', dryRun: true, outcome: 'allowed', tenantId: 'ghost' },
      'the audit row says dry run',
    );
    t.equal(
      (
        await call(service, 'POST', '/tenants?dryRun=true', {
          token: operator,
          body: { id: 'acme' },
        })
      ).status,
      409,
      'a dry run checks as the real call does',
    );
    answer = await call(service, 'GET', '/tenants/acme', { token: owner });
    t.match(answer.json, { id: 'acme', state: 'active' });
    answer = await call(service, 'GET', '/tenants', { token: owner });
    t.same(
      (answer.json as TenantList).tenants.map((tenant) => tenant.id),
      ['acme'],
    );
    const unnamed = await call(service, 'POST', '/tenants', {
      token: operator,
      body: { id: 'unnamed' },
    });
    t.equal(unnamed.status, 201);
    t.equal((unnamed.json as { name: string }).name, 'unnamed', 'a tenant without a name: its id');
  });

  const client = await service.tenant('acme', 'read,write,delete,admin', owner);
  t.same(
    await seed(client),
    [201, 201, 200, 200, 200, 200, 200, 200, 204],
    'data written through the public API',
  );

  await t.test('disable: reason, dry run, then keys revoked and tokens stop at once', async (t) => {
    t.equal(
      (await call(service, 'POST', '/tenants/acme/disable', { token: owner, body: {} })).status,
      400,
      'reason required',
    );
    t.equal(
      (
        await call(service, 'POST', '/tenants/acme/disable', {
          token: owner,
          body: { reason: '   ' },
        })
      ).status,
      400,
      'a blank reason',
    );
    let answer = await call(service, 'POST', '/tenants/acme/disable?dryRun=true', {
      token: owner,
      body: { reason: 'unpaid' },
    });
    t.equal(answer.status, 200);
    t.match(answer.json, {
      dryRun: true,
      action: 'disableTenant',
      target: 'tenants/acme',
      blockers: [],
      counts: {
        buckets: 2,
        objects: 4,
        versions: 6,
        deleteMarkers: 1,
        legalHeldVersions: 0,
        retainedVersions: 0,
        accessKeys: 1,
        physicalBytes: Number,
      },
    });
    const plan = answer.json as { counts: { physicalBytes: number }; applied: boolean };
    t.ok(plan.counts.physicalBytes > 0);
    t.equal(plan.applied, false, 'a dry run says it applied nothing');
    t.match(
      answer.json,
      { tenant: { id: 'acme', state: 'active' } },
      'and shows the tenant as it is',
    );
    t.notOk('disabledAt' in (answer.json as { tenant: object }).tenant);
    t.equal(
      ((await call(service, 'GET', '/tenants/acme', { token: owner })).json as TenantAnswer).state,
      'active',
      'the dry run disabled nothing',
    );
    t.equal((await client.request('GET', '/buckets')).status, 200, 'the bearer token still works');
    t.match(await auditRowOf(service, owner, answer.headers.get('x-request-id') ?? ''), {
      action: 'disableTenant',
      dryRun: true,
      reason: 'unpaid',
    });

    answer = await call(service, 'POST', '/tenants/acme/disable', {
      token: owner,
      body: { reason: 'unpaid' },
    });
    t.equal(answer.status, 200);
    t.match(answer.json, {
      dryRun: false,
      applied: true,
      counts: { accessKeys: 1 },
      tenant: { id: 'acme', state: 'disabled', disabledAt: String },
    });
    t.equal(
      (await client.request('GET', '/buckets')).status,
      401,
      'the bearer token stops at once',
    );
    t.equal(
      (await mintBearer(service, client.accessKeyId, client.secretKey)).status,
      401,
      'the secret no longer mints tokens',
    );
    const keys = (
      (await call(service, 'GET', '/tenants/acme/keys', { token: owner })).json as {
        keys: unknown;
      }
    ).keys;
    t.match(keys, [{ accessKeyId: client.accessKeyId, state: 'revoked', revokedAt: String }]);
    t.equal(
      (
        await call(service, 'POST', '/tenants/acme/keys', {
          token: owner,
          body: { accountId: 'app', scopes: 'read' },
        })
      ).status,
      409,
      'no new keys for a disabled tenant',
    );
    answer = await call(service, 'POST', '/tenants/acme/disable', {
      token: owner,
      body: { reason: 'again' },
    });
    t.match(
      answer.json,
      { applied: true, counts: { accessKeys: 0 }, tenant: { state: 'disabled' } },
      'disabling twice changes nothing',
    );
  });

  await t.test('delete: validation, state, object lock, dry run', async (t) => {
    await call(service, 'POST', '/tenants', { token: owner, body: { id: 'busy' } });
    let answer = await call(service, 'POST', '/tenants/acme/delete', {
      token: owner,
      body: { confirm: 'acme' },
    });
    t.equal(answer.status, 400, 'reason required');
    answer = await call(service, 'POST', '/tenants/acme/delete', {
      token: owner,
      body: { reason: 'closing' },
    });
    t.equal(answer.status, 400, 'confirm required');
    answer = await call(service, 'POST', '/tenants/acme/delete', {
      token: owner,
      body: { reason: 'closing', confirm: 'ACME' },
    });
    t.equal(answer.status, 400, 'confirm must equal the id exactly');
    t.match((answer.json as Problem).message, /confirm/);
    answer = await call(service, 'POST', '/tenants/busy/delete', {
      token: owner,
      body: { reason: 'closing', confirm: 'busy' },
    });
    t.equal(answer.status, 409, 'an active tenant cannot be deleted');
    answer = await call(service, 'POST', '/tenants/busy/delete?dryRun=true', {
      token: owner,
      body: { reason: 'closing', confirm: 'busy' },
    });
    t.equal(answer.status, 409, 'a dry run is refused as the real call is');
    t.match(answer.json, { code: 'conflict', message: /busy is active; disable it first/ });
    answer = await call(service, 'POST', '/tenants/busy/delete?dryRun=True', {
      token: owner,
      body: { reason: 'closing', confirm: 'busy' },
    });
    t.equal(answer.status, 409, 'dryRun=True is a dry run too (any case)');
    t.match(answer.json, { code: 'conflict' });
    answer = await call(service, 'POST', '/tenants/ghost/delete', {
      token: owner,
      body: { reason: 'closing', confirm: 'ghost' },
    });
    t.equal(answer.status, 404);

    answer = await call(service, 'POST', '/tenants/acme/delete?dryRun=true', {
      token: owner,
      body: { reason: 'closing', confirm: 'acme' },
    });
    t.equal(answer.status, 200);
    t.match(answer.json, {
      dryRun: true,
      action: 'deleteTenant',
      blockers: [],
      counts: { buckets: 2, objects: 4, versions: 6, deleteMarkers: 1, accessKeys: 1 },
    });
    t.equal(
      ((await call(service, 'GET', '/tenants/acme', { token: owner })).json as TenantAnswer).state,
      'disabled',
      'the dry run deleted nothing',
    );
    t.equal(
      ((await call(service, 'GET', '/tenants/acme/usage', { token: owner })).json as UsageAnswer)
        .objects,
      4,
    );
  });

  await t.test('delete: 412 while a version is under legal hold or retention', async (t) => {
    const locked = await service.tenant('vault', 'read,write,delete,admin', owner);
    t.equal(
      (await locked.request('POST', '/buckets', { json: { name: 'evidence', objectLock: true } }))
        .status,
      201,
    );
    t.equal((await locked.put('evidence', 'held.txt', 'held')).status, 200);
    t.equal((await locked.put('evidence', 'kept.txt', 'kept')).status, 200);
    let response = await locked.request('PUT', '/buckets/evidence/object-legal-hold/held.txt', {
      json: { status: 'ON' },
    });
    t.equal(response.status, 200, 'legal hold set through the data plane');
    const until = new Date(Date.now() + 86_400_000).toISOString();
    response = await locked.request('PUT', '/buckets/evidence/object-retention/kept.txt', {
      json: { mode: 'GOVERNANCE', retainUntil: until },
    });
    t.equal(response.status, 200, 'retention set through the data plane');
    await call(service, 'POST', '/tenants/vault/disable', {
      token: owner,
      body: { reason: 'closing' },
    });
    let answer = await call(service, 'POST', '/tenants/vault/delete?dryRun=true', {
      token: owner,
      body: { reason: 'closing', confirm: 'vault' },
    });
    t.equal(answer.status, 412, 'the dry run is refused as the delete is');
    t.match(answer.json, {
      code: 'precondition_failed',
      message: /1 versions are under a retention window; 1 versions are under legal hold/,
      blockers: [
        { code: 'retention', count: 1 },
        { code: 'legal_hold', count: 1 },
      ],
    });
    // The refusal carries the whole plan: what the delete would touch, all eight counts.
    const counts = (answer.json as { counts?: Record<string, number> }).counts ?? {};
    t.equal(Object.keys(counts).length, 8, 'all eight counts');
    t.match(counts, { buckets: 1, objects: 2 });
    answer = await call(service, 'POST', '/tenants/vault/delete', {
      token: owner,
      body: { reason: 'closing', confirm: 'vault' },
    });
    t.equal(answer.status, 412);
    t.equal((answer.json as Problem).code, 'precondition_failed');
    t.equal(
      ((await call(service, 'GET', '/tenants/vault', { token: owner })).json as TenantAnswer).state,
      'disabled',
      'nothing was deleted',
    );
  });

  await t.test(
    'delete applies the plan; the tenant shows as deleted and its resources are gone',
    async (t) => {
      let answer = await call(service, 'POST', '/tenants/acme/delete', {
        token: owner,
        body: { reason: 'closing', confirm: 'acme' },
      });
      t.equal(answer.status, 200);
      t.match(answer.json, {
        dryRun: false,
        applied: true,
        action: 'deleteTenant',
        blockers: [],
        counts: { buckets: 2, versions: 6 },
        tenant: { id: 'acme', state: 'deleted', deletedAt: String },
      });
      t.match(
        await auditRowOf(
          service,
          owner,
          answer.headers.get('x-request-id') ?? '',
          'tenant=acme&limit=1000',
        ),
        { action: 'deleteTenant', reason: 'closing', status: 200 },
      );
      const tenant = await waitFor('the purge', async () => {
        const current = (await call(service, 'GET', '/tenants/acme', { token: owner }))
          .json as TenantAnswer;
        return current.deletion?.state === 'complete' ? current : undefined;
      });
      t.match(tenant, { state: 'deleted', deletion: { state: 'complete', completedAt: String } });
      t.notOk(
        (
          (await call(service, 'GET', '/tenants', { token: owner })).json as TenantList
        ).tenants.some((entry) => entry.id === 'acme'),
        'not listed',
      );
      t.ok(
        (
          (await call(service, 'GET', '/tenants?includeDeleted=true', { token: owner }))
            .json as TenantList
        ).tenants.some((entry) => entry.id === 'acme'),
        'listed on request',
      );
      for (const path of [
        '/tenants/acme/keys',
        '/tenants/acme/accounts',
        '/tenants/acme/usage',
        '/tenants/acme/quota',
      ]) {
        t.equal((await call(service, 'GET', path, { token: owner })).status, 404, path);
      }
      t.equal(
        (await call(service, 'POST', '/tenants', { token: owner, body: { id: 'acme' } })).status,
        409,
        'a deleted id is never reused',
      );
      answer = await call(service, 'POST', '/tenants/acme/delete', {
        token: owner,
        body: { reason: 'again', confirm: 'acme' },
      });
      t.equal(answer.status, 409, 'deleting twice');
      t.equal((await mintBearer(service, client.accessKeyId, client.secretKey)).status, 401);
    },
  );

  await t.test('a disable counts and revokes only keys that are active now', async (t) => {
    await call(service, 'POST', '/tenants', { token: owner, body: { id: 'kexp' } });
    await call(service, 'POST', '/tenants/kexp/accounts', { token: owner, body: { id: 'app' } });
    const keyOf = async (body: Record<string, unknown>): Promise<string> =>
      (
        (
          await call(service, 'POST', '/tenants/kexp/keys', {
            token: owner,
            body: { accountId: 'app', scopes: 'read', ...body },
          })
        ).json as { accessKeyId: string }
      ).accessKeyId;
    const live = await keyOf({});
    const expiring = await keyOf({ expiresAt: new Date(Date.now() + 1500).toISOString() });
    const keysNow = async (): Promise<Record<string, { state: string; revokedAt?: string }>> =>
      Object.fromEntries(
        (
          (await call(service, 'GET', '/tenants/kexp/keys', { token: owner })).json as {
            keys: Array<{ accessKeyId: string; state: string; revokedAt?: string }>;
          }
        ).keys.map((key) => [key.accessKeyId, key]),
      );
    await waitFor('the key to expire', async () =>
      (await keysNow())[expiring]?.state === 'expired' ? true : undefined,
    );
    const plan = await call(service, 'POST', '/tenants/kexp/disable?dryRun=true', {
      token: owner,
      body: { reason: 'test' },
    });
    t.match(plan.json, { counts: { accessKeys: 1 } }, 'the expired key is not counted');
    const applied = await call(service, 'POST', '/tenants/kexp/disable', {
      token: owner,
      body: { reason: 'test' },
    });
    t.match(applied.json, { applied: true, counts: { accessKeys: 1 } });
    const keys = await keysNow();
    t.match(keys[live], { state: 'revoked', revokedAt: String });
    t.equal(keys[expiring]?.state, 'expired', 'the expired key stays expired');
    t.notOk(keys[expiring]?.revokedAt, 'and is not marked revoked');
  });

  await t.test('names, reasons and external references refuse control characters', async (t) => {
    const created = await call(service, 'POST', '/tenants', {
      token: owner,
      body: { id: 'ctl', name: 'Zürich – “Ops” 🚀' },
    });
    t.equal(created.status, 201, 'other Unicode is fine');
    t.equal(
      (await call(service, 'POST', '/tenants/ctl/accounts', { token: owner, body: { id: 'app' } }))
        .status,
      201,
    );
    const bodies: Array<[string, string, (text: string) => Record<string, unknown>, string]> = [
      ['POST', '/tenants', (text) => ({ id: 'ctl-other', name: text }), 'name'],
      ['POST', '/tenants', (text) => ({ id: 'ctl-other', reason: text }), 'reason'],
      ['POST', '/tenants/ctl/accounts', (text) => ({ id: 'other', name: text }), 'name'],
      [
        'POST',
        '/tenants/ctl/keys',
        (text) => ({ accountId: 'app', scopes: 'read', externalRef: text }),
        'externalRef',
      ],
      ['PUT', '/tenants/ctl/quota', (text) => ({ maxBytes: 1, reason: text }), 'reason'],
      ['POST', '/tenants/ctl/disable', (text) => ({ reason: text }), 'reason'],
      ['POST', '/cluster/consensus/drain', (text) => ({ id: 'n2', reason: text }), 'reason'],
    ];
    for (const text of [
      'a\u0000b',
      'ok\r\nforged: row',
      'tab\there',
      'del\u007f',
      '\u001f',
      'next\u0085line',
      'line\u2028separator',
    ]) {
      for (const [method, path, body, field] of bodies) {
        const answer = await call(service, method, path, { token: owner, body: body(text) });
        // Escaped by hand: JSON.stringify leaves U+2028 and NEL as they are, and they would
        // break the TAP line of the assertion.
        const shown = JSON.stringify(text).replace(
          /[\u0085\u2028]/g,
          (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
        );
        t.equal(answer.status, 400, `${method} ${path} ${field} ${shown}`);
        t.match(
          (answer.json as Problem).message,
          new RegExp(`^${field} must not contain control characters`),
        );
      }
    }
    t.equal((await call(service, 'GET', '/tenants/ctl-other', { token: owner })).status, 404);
    t.match((await call(service, 'GET', '/tenants/ctl', { token: owner })).json, {
      state: 'active',
    });
    t.same((await call(service, 'GET', '/tenants/ctl/keys', { token: owner })).json, { keys: [] });
    t.same((await call(service, 'GET', '/tenants/ctl/quota', { token: owner })).json, {
      tenantId: 'ctl',
      usedBytes: 0,
      usedObjects: 0,
    });
  });
});

/** Two buckets: 3 objects in an unversioned one; 2 keys with 3 versions and a marker in another. */
async function seed(client: DataClient): Promise<number[]> {
  const statuses = [
    (await client.request('POST', '/buckets', { json: { name: 'logs' } })).status,
    (await client.request('POST', '/buckets', { json: { name: 'history', versioning: 'Enabled' } }))
      .status,
  ];
  for (const key of ['a', 'b', 'c'])
    statuses.push((await client.put('logs', key, `body of ${key}`)).status);
  for (const body of ['v1', 'v2']) statuses.push((await client.put('history', 'doc', body)).status);
  statuses.push((await client.put('history', 'gone', 'v1')).status);
  statuses.push((await client.request('DELETE', '/buckets/history/objects/gone')).status);
  // 6 versions (3 + 2 + 1), 1 delete marker, 4 current objects (a, b, c, doc).
  return statuses;
}
