// Goal: service accounts and access keys behave as admin-api.md §2–§4 say: the secret appears
// once (create and rotate) and never in a list; scope syntax and expiresAt formats are validated
// with clear 400s; rotate makes the old secret stop minting tokens at once; revoke needs a
// reason and stops the key's tokens at once; expiry is enforced; dry runs change nothing;
// refused and rate-limited token requests are audited under the key and its tenant, and a
// request that matches no route under the caller its token names.
// Method: the real service on loopback; keys minted through the admin API and used on the
// public API (token mint and a bucket listing) to observe each effect.
import t from 'tap';
import { Service } from '../helpers/service.js';
import { call, mintToken, mintBearer, dataRequest, auditRowOf } from './admin-testing.js';

/** The fields of a key answer these tests read; t.match checks the rest. */
interface Key {
  accessKeyId: string;
  secretKey: string;
  scopes: string;
  state: string;
  expiresAt?: string;
  revokedAt?: string;
}

t.test('accounts and keys', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const operator = (await mintToken(service, 'operator')).token;
  const viewer = (await mintToken(service, 'viewer')).token;
  /** A new key of account `ingest` with scope `read`. */
  const createReadKey = async (): Promise<Key> =>
    (
      await call(service, 'POST', '/tenants/acme/keys', {
        token: operator,
        body: { accountId: 'ingest', scopes: 'read' },
      })
    ).json as Key;
  t.equal(
    (await call(service, 'POST', '/tenants', { token: operator, body: { id: 'acme' } })).status,
    201,
  );

  await t.test('service accounts', async (t) => {
    let answer = await call(service, 'POST', '/tenants/acme/accounts', {
      token: operator,
      body: { id: 'ingest', name: 'Ingest pipeline' },
    });
    t.equal(answer.status, 201);
    t.match(answer.json, {
      id: 'ingest',
      tenantId: 'acme',
      name: 'Ingest pipeline',
      createdAt: String,
    });
    t.equal(
      (
        await call(service, 'POST', '/tenants/acme/accounts', {
          token: operator,
          body: { id: 'ingest' },
        })
      ).status,
      409,
    );
    t.equal(
      (await call(service, 'POST', '/tenants/acme/accounts', { token: operator, body: {} })).status,
      400,
    );
    t.equal(
      (
        await call(service, 'POST', '/tenants/acme/accounts', {
          token: operator,
          body: { id: 'Bad Id!' },
        })
      ).status,
      400,
    );
    t.equal(
      (
        await call(service, 'POST', '/tenants/nobody/accounts', {
          token: operator,
          body: { id: 'x1' },
        })
      ).status,
      404,
    );
    answer = await call(service, 'POST', '/tenants/acme/accounts?dryRun=true', {
      token: operator,
      body: { id: 'later' },
    });
    t.match(answer.json, {
      dryRun: true,
      applied: false,
      counts: { accounts: 1 },
      blockers: [],
      result: { id: 'later' },
    });
    answer = await call(service, 'GET', '/tenants/acme/accounts', { token: viewer });
    t.same(
      (answer.json as { accounts: Array<{ id: string }> }).accounts.map((account) => account.id),
      ['ingest'],
      'the dry run created nothing',
    );
    answer = await call(service, 'POST', '/tenants/acme/accounts', {
      token: operator,
      body: { id: 'svc_Backup.1' },
    });
    t.equal(answer.status, 201, 'account ids take the usual id characters, not only a-z0-9-');
  });

  await t.test('create: the secret once, validation of scopes and expiry', async (t) => {
    let answer = await call(service, 'POST', '/tenants/acme/keys', {
      token: operator,
      body: {
        accountId: 'ingest',
        scopes: 'write,read',
        externalRef: 'ticket-7',
        reason: 'pipeline',
      },
    });
    t.equal(answer.status, 201);
    t.match(answer.json, {
      accessKeyId: /^LW[A-Z2-7]{18}$/,
      secretKey: /^[A-Za-z0-9_-]{40}$/,
      tenantId: 'acme',
      accountId: 'ingest',
      scopes: 'write,read',
      externalRef: 'ticket-7',
      state: 'active',
    });
    t.equal(answer.headers.get('cache-control'), 'no-store');
    const { accessKeyId, secretKey } = answer.json as { accessKeyId: string; secretKey: string };
    answer = await call(service, 'GET', '/tenants/acme/keys', { token: viewer });
    const { keys } = answer.json as { keys: Key[] };
    t.equal(keys.length, 1);
    t.notOk('secretKey' in keys[0]!, 'a list never shows a secret');
    t.notOk(JSON.stringify(answer.json).includes(secretKey));
    t.equal((await mintBearer(service, accessKeyId, secretKey)).status, 200, 'the key works');
    t.equal((await mintBearer(service, accessKeyId, 'wrong')).status, 401, 'a wrong secret');
    t.equal((await mintBearer(service, '', secretKey)).status, 401, 'an empty key id');
    t.equal((await mintBearer(service, '', '')).status, 401, 'empty id and secret');
    const refused = await fetch(`${service.publicUrl}/auth/token`, {
      method: 'POST',
      headers: { Authorization: `Basic ${Buffer.from(`${accessKeyId}:x`).toString('base64')}` },
    });
    t.equal(refused.status, 401);
    t.match(refused.headers.get('www-authenticate'), /^Basic realm="lightwell"/, 'asks for Basic');
    const bare = await fetch(`${service.publicUrl}/buckets`);
    t.equal(bare.status, 401);
    t.equal(bare.headers.get('www-authenticate'), 'Bearer realm="lightwell"', 'asks for a bearer');

    answer = await call(service, 'POST', '/tenants/acme/keys', {
      token: operator,
      body: { accountId: 'ingest', scopes: 'op=read:bucket=logs:prefix=2026/,op=write:bucket=*' },
    });
    t.equal(answer.status, 201, 'resource scopes');
    t.equal(
      (answer.json as Key).scopes,
      'op=read:bucket=logs:prefix=2026/,op=write:bucket=*:prefix=',
      "as sent, in the spec's full form",
    );
    const bad: Array<[unknown, RegExp]> = [
      ['read,fly', /fly/],
      ['read,,write', /./],
      ['op=read:bucket=BAD', /./],
      ['read,op=write:bucket=*', /./],
      ['', /scopes is required/],
    ];
    for (const [scopes, message] of bad) {
      answer = await call(service, 'POST', '/tenants/acme/keys', {
        token: operator,
        body: { accountId: 'ingest', scopes },
      });
      t.equal(answer.status, 400, `scopes ${JSON.stringify(scopes)}`);
      t.match((answer.json as { message: string }).message, message);
    }
    t.equal(
      (
        await call(service, 'POST', '/tenants/acme/keys', {
          token: operator,
          body: { accountId: 'nobody', scopes: 'read' },
        })
      ).status,
      404,
      'unknown account',
    );
    for (const expiresAt of ['2099-12-31', '2099-12-31T10:00:00Z', '2099-12-31T10:00:00.5+02:00']) {
      answer = await call(service, 'POST', '/tenants/acme/keys', {
        token: operator,
        body: { accountId: 'ingest', scopes: 'read', expiresAt },
      });
      t.equal(answer.status, 201, `expiresAt ${expiresAt}`);
    }
    t.equal((answer.json as Key).expiresAt, '2099-12-31T08:00:00.500Z', 'offsets are honoured');
    answer = await call(service, 'POST', '/tenants/acme/keys', {
      token: operator,
      body: { accountId: 'ingest', scopes: 'read', expiresAt: '2099-12-31' },
    });
    t.equal(
      (answer.json as Key).expiresAt,
      '2099-12-31T23:59:59.999Z',
      'a date means the end of that day, UTC',
    );
    for (const expiresAt of ['2020-01-01', 'tomorrow', '2099-02-30', 12345, '2099-12-31 10:00']) {
      answer = await call(service, 'POST', '/tenants/acme/keys', {
        token: operator,
        body: { accountId: 'ingest', scopes: 'read', expiresAt },
      });
      t.equal(answer.status, 400, `expiresAt ${JSON.stringify(expiresAt)}`);
    }
    const keyCount = async (): Promise<number> =>
      (
        (await call(service, 'GET', '/tenants/acme/keys', { token: viewer })).json as {
          keys: Key[];
        }
      ).keys.length;
    const before = await keyCount();
    answer = await call(service, 'POST', '/tenants/acme/keys?dryRun=true', {
      token: operator,
      body: { accountId: 'ingest', scopes: 'read' },
    });
    t.match(answer.json, {
      dryRun: true,
      counts: { accessKeys: 1 },
      result: { scopes: 'read', state: 'active' },
    });
    t.notOk('secretKey' in (answer.json as { result: object }).result, 'a dry run makes no secret');
    t.equal(await keyCount(), before, 'a dry run creates no key');
  });

  await t.test('rotate: a new secret once; the old one stops at once', async (t) => {
    const created = await createReadKey();
    const path = `/tenants/acme/keys/${created.accessKeyId}/rotate`;
    let answer = await call(service, 'POST', `${path}?dryRun=true`, {
      token: operator,
      body: { scopes: 'read,write' },
    });
    t.match(answer.json, { dryRun: true, result: { scopes: 'read,write', rotatedAt: String } });
    t.equal(
      (await mintBearer(service, created.accessKeyId, created.secretKey)).status,
      200,
      'a dry run keeps the old secret',
    );
    answer = await call(service, 'POST', path, {
      token: operator,
      body: { scopes: 'read,write', reason: 'leaked' },
    });
    t.equal(answer.status, 200);
    t.match(answer.json, {
      accessKeyId: created.accessKeyId,
      scopes: 'read,write',
      state: 'active',
      rotatedAt: String,
      secretKey: /^[A-Za-z0-9_-]{40}$/,
    });
    const rotated = answer.json as Key;
    t.not(rotated.secretKey, created.secretKey);
    t.equal(
      (await mintBearer(service, created.accessKeyId, created.secretKey)).status,
      401,
      'the old secret stops at once',
    );
    t.equal(
      (await mintBearer(service, created.accessKeyId, rotated.secretKey)).status,
      200,
      'the new secret works',
    );
    t.equal(
      (await call(service, 'POST', path, { token: operator, body: { scopes: 'nope' } })).status,
      400,
    );
    t.equal(
      (
        await call(service, 'POST', '/tenants/acme/keys/LWAAAAAAAAAAAAAAAAAA/rotate', {
          token: operator,
          body: {},
        })
      ).status,
      404,
    );
  });

  await t.test('revoke: reason required; tokens stop at once; idempotent', async (t) => {
    const created = await createReadKey();
    const bearer = await mintBearer(service, created.accessKeyId, created.secretKey);
    t.equal((await dataRequest(service, bearer.token ?? '', 'GET', '/buckets')).status, 200);
    const path = `/tenants/acme/keys/${created.accessKeyId}/revoke`;
    t.equal(
      (await call(service, 'POST', path, { token: operator, body: {} })).status,
      400,
      'reason required',
    );
    let answer = await call(service, 'POST', `${path}?dryRun=true`, {
      token: operator,
      body: { reason: 'offboarding' },
    });
    t.match(answer.json, {
      dryRun: true,
      counts: { accessKeys: 1 },
      result: { state: 'revoked' },
    });
    t.equal(
      (await dataRequest(service, bearer.token ?? '', 'GET', '/buckets')).status,
      200,
      'a dry run revokes nothing',
    );
    answer = await call(service, 'POST', path, {
      token: operator,
      body: { reason: 'offboarding' },
    });
    t.equal(answer.status, 200);
    t.match(answer.json, { accessKeyId: created.accessKeyId, state: 'revoked', revokedAt: String });
    t.notOk('secretKey' in (answer.json as Key));
    t.equal(
      (await dataRequest(service, bearer.token ?? '', 'GET', '/buckets')).status,
      401,
      'outstanding tokens stop at once',
    );
    const basic = Buffer.from(`${created.accessKeyId}:${created.secretKey}`).toString('base64');
    const revokedMint = await fetch(`${service.publicUrl}/auth/token`, {
      method: 'POST',
      headers: { Authorization: `Basic ${basic}` },
    });
    t.equal(revokedMint.status, 401, 'the right secret of a revoked key mints nothing');
    t.match(revokedMint.headers.get('www-authenticate'), /^Basic /, 'and the 401 asks for Basic');
    const planAgain = await call(service, 'POST', `${path}?dryRun=true`, {
      token: operator,
      body: { reason: 'again' },
    });
    t.match(planAgain.json, { counts: { accessKeys: 0 } }, 'a dry run on a revoked key: none');
    const again = await call(service, 'POST', path, { token: operator, body: { reason: 'again' } });
    t.equal(
      (again.json as Key).revokedAt,
      (answer.json as Key).revokedAt,
      'revoking again changes nothing',
    );
    t.equal(
      (
        await call(service, 'POST', `/tenants/acme/keys/${created.accessKeyId}/rotate`, {
          token: operator,
          body: {},
        })
      ).status,
      409,
      'a revoked key cannot be rotated',
    );
    await call(service, 'POST', '/tenants', { token: operator, body: { id: 'other' } });
    t.equal(
      (
        await call(service, 'POST', `/tenants/other/keys/${created.accessKeyId}/revoke`, {
          token: operator,
          body: { reason: 'x' },
        })
      ).status,
      404,
      "another tenant's key is not found under this tenant",
    );
  });

  await t.test('expiry is enforced', async (t) => {
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const created = (
      await call(service, 'POST', '/tenants/acme/keys', {
        token: operator,
        body: { accountId: 'ingest', scopes: 'read', expiresAt },
      })
    ).json as Key;
    t.equal(created.expiresAt, expiresAt);
    t.equal((await mintBearer(service, created.accessKeyId, created.secretKey)).status, 200);
    await new Promise((resolve) => setTimeout(resolve, Date.parse(expiresAt) - Date.now() + 50));
    t.equal(
      (await mintBearer(service, created.accessKeyId, created.secretKey)).status,
      401,
      'an expired key mints nothing',
    );
    const listed = (
      (await call(service, 'GET', '/tenants/acme/keys', { token: viewer })).json as { keys: Key[] }
    ).keys.find((key) => key.accessKeyId === created.accessKeyId);
    t.equal(listed?.state, 'expired');
    t.equal(
      (
        await call(service, 'POST', `/tenants/acme/keys/${created.accessKeyId}/rotate`, {
          token: operator,
          body: {},
        })
      ).status,
      409,
      'rotating an expired key needs a new expiresAt',
    );
    const renewed = await call(
      service,
      'POST',
      `/tenants/acme/keys/${created.accessKeyId}/rotate`,
      { token: operator, body: { expiresAt: '2099-01-01' } },
    );
    t.equal(renewed.status, 200);
    t.equal(
      (await mintBearer(service, created.accessKeyId, (renewed.json as Key).secretKey)).status,
      200,
      'a rotation with a new expiry revives it',
    );
  });

  await t.test('refused token requests are audited under the key and its tenant', async (t) => {
    // data-api.md §5: every request, denials included, is audited, and a tenant's audit (as a
    // token scoped to it reads it) shows the requests for its keys: a wrong secret (401), a
    // rate-limited mint (429), and a bearer token whose key was revoked (401).
    const scoped = await mintToken(service, 'viewer', ['--tenant', 'acme']);
    const created = await createReadKey();
    const tokenRequest = async (secretKey: string): Promise<Response> => {
      const basic = Buffer.from(`${created.accessKeyId}:${secretKey}`).toString('base64');
      const response = await fetch(`${service.publicUrl}/auth/token`, {
        method: 'POST',
        headers: { Authorization: `Basic ${basic}` },
      });
      await response.arrayBuffer();
      return response;
    };
    const bearer = await mintBearer(service, created.accessKeyId, created.secretKey);
    const wrong = await tokenRequest('not-the-secret');
    t.equal(wrong.status, 401);
    let limited: Response | undefined;
    for (let attempt = 0; attempt < 100 && !limited; attempt += 1) {
      const answer = await tokenRequest('not-the-secret');
      if (answer.status === 429) limited = answer;
    }
    t.equal(limited?.status, 429, 'past the burst, token requests are rate-limited');
    await call(service, 'POST', `/tenants/acme/keys/${created.accessKeyId}/revoke`, {
      token: operator,
      body: { reason: 'audit test' },
    });
    const revoked = await fetch(`${service.publicUrl}/buckets`, {
      headers: { Authorization: `Bearer ${bearer.token ?? ''}` },
    });
    await revoked.arrayBuffer();
    t.equal(revoked.status, 401);
    const expected = [
      { answer: wrong, status: 401, what: 'wrong secret' },
      { answer: limited, status: 429, what: 'rate-limited' },
      { answer: revoked, status: 401, what: 'revoked key' },
    ];
    for (const { answer, status, what } of expected) {
      const requestId = answer?.headers.get('x-request-id') ?? '';
      const row = await auditRowOf(service, scoped.token, requestId, 'tenant=acme&limit=1000');
      t.match(
        row,
        { outcome: 'denied', status, actor: created.accessKeyId, tenantId: 'acme' },
        what,
      );
      t.notMatch(JSON.stringify(row), 'not-the-secret', `${what}: no secret in the row`);
    }
    // Only a well-formed key id is written as the actor: not a secret pasted into the id field.
    const pasted = await fetch(`${service.publicUrl}/auth/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ accessKeyId: 'pasted-secret\r\nforged', secretKey: 'x' }),
    });
    await pasted.arrayBuffer();
    t.equal(pasted.status, 401);
    // No credentials at all asks for them (401 with a Basic challenge); both ways at once is
    // unclear (400), whichever key each names.
    const bare = await fetch(`${service.publicUrl}/auth/token`, { method: 'POST' });
    t.match(await bare.json(), { code: 'unauthorized', message: /credentials are required/ });
    t.equal(bare.status, 401);
    t.match(bare.headers.get('www-authenticate'), /^Basic realm="lightwell"/);
    const basic = Buffer.from(`${created.accessKeyId}:x`).toString('base64');
    const twoWays = await fetch(`${service.publicUrl}/auth/token`, {
      method: 'POST',
      headers: { Authorization: `Basic ${basic}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ accessKeyId: 'LWOTHER', secretKey: 'y' }),
    });
    t.match(await twoWays.json(), { code: 'bad_request', message: /not both/ });
    t.equal(twoWays.status, 400);
    const owner = await mintToken(service, 'owner');
    const row = await auditRowOf(service, owner.token, pasted.headers.get('x-request-id') ?? '');
    t.match(row, { actor: 'anonymous' }, 'a malformed key id is not the actor');
    t.notMatch(JSON.stringify(row), 'pasted-secret', 'and is not in the row');
  });

  await t.test('a request that matches no route is audited under its caller', async (t) => {
    const owner = await mintToken(service, 'owner');
    const created = await createReadKey();
    const bearer = await mintBearer(service, created.accessKeyId, created.secretKey);
    const unrouted = [
      { url: `${service.adminUrl}/nosuch`, method: 'GET', token: owner.token, status: 404 },
      { url: `${service.adminUrl}/tenants`, method: 'DELETE', token: owner.token, status: 405 },
      { url: `${service.publicUrl}/nosuch`, method: 'GET', token: bearer.token, status: 404 },
      { url: `${service.publicUrl}/buckets`, method: 'PATCH', token: bearer.token, status: 405 },
    ];
    for (const { url, method, token, status } of unrouted) {
      const answer = await fetch(url, {
        method,
        headers: { Authorization: `Bearer ${token ?? ''}` },
      });
      await answer.arrayBuffer();
      t.equal(answer.status, status, `${method} ${url}`);
      const requestId = answer.headers.get('x-request-id') ?? '';
      const row = await auditRowOf(service, owner.token, requestId);
      const actor = url.startsWith(service.adminUrl) ? /^admin:/ : created.accessKeyId;
      t.match(row, { action: 'unrouted', actor }, `${method} ${url}: the caller is named`);
      if (!url.startsWith(service.adminUrl)) t.match(row, { tenantId: 'acme' });
    }
  });
});
