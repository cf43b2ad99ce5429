// Goal: signed URLs and CORS behave as data-api.md §4 says, tried as a browser would: minting
// needs the scope of the method (a read-only key cannot mint PUT), fields of the other method
// are refused, ttl is clamped to security.max_presign_ttl; at use a tampered, expired,
// wrong-method, wrong-resource or revoked URL gets 401/403 (a 401 challenges with
// error="invalid_token", not a plain bearer challenge); upload constraints hold
// (contentLengthMax refused before the body is read and nothing stored, pinned content type,
// checksum, idempotency key, keyPrefix with a browser-chosen suffix); the reason lands on the
// mint and use audit rows; CORS rules need an admin key and hold the bounds the served document
// states (1 to 100 rules, origins and methods), and a browser-style preflight
// (OPTIONS with Origin and Access-Control-Request-Method/Headers) succeeds only when the token
// authorizes the method and resource and a stored rule matches, carrying Access-Control-*
// headers only then.
// Method: one real service on loopback (max presign ttl 1h); plain fetch for the browser side
// (no bearer token), the audit rows read through the admin API.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Service, type DataClient } from '../helpers/service.js';

/** A JSON schema of the served document, as far as these tests read one. */
interface Schema {
  properties: Record<string, Schema>;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
}

/** The fields of a `POST /sign-url` answer that these tests read; t.match checks the rest. */
interface SignedUrl {
  url: string;
  token: string;
  expiresAt: string;
}

/** `GET /buckets/{b}/cors`. */
interface CorsConfig {
  rules: Array<{ allowedOrigins: string[] }>;
}

const urlOf = (answer: { json: unknown }): string => (answer.json as SignedUrl).url;

const sha256 = (body: Buffer | string): string =>
  createHash('sha256').update(body).digest('base64');

t.test('signed URLs and CORS preflight', async (t) => {
  const service = await Service.start({ env: { LIGHTWELL_SECURITY_MAX_PRESIGN_TTL: '1h' } });
  t.teardown(() => service.close());
  const admin = service.adminToken();
  const client = await service.tenant('acme', undefined, admin);
  const reader = await service.tenant('acme', 'read', admin);
  const scoped = await service.tenant(
    'acme',
    'op=read:bucket=site,op=write:bucket=site:prefix=uploads/',
    admin,
  );
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const browser = (path: string, init: RequestInit = {}): Promise<Response> =>
    fetch(origin + path, init);
  const sign = (
    body: Record<string, unknown>,
    as: DataClient = client,
  ): ReturnType<DataClient['request']> => as.request('POST', '/sign-url', { json: body });
  t.equal((await client.request('POST', '/buckets', { json: { name: 'site' } })).status, 201);
  const page = Buffer.from('<h1>hello</h1>');
  await client.put('site', 'pages/index.html', page, { 'Content-Type': 'text/html' });

  await t.test('GET: mint, download, overrides, tampering, wrong method or resource', async (t) => {
    const minted = await sign({
      method: 'GET',
      bucket: 'site',
      key: 'pages/index.html',
      responseContentDisposition: 'attachment; filename="i.html"',
      responseContentType: 'application/octet-stream',
    });
    t.equal(minted.status, 200);
    t.match(minted.json, {
      method: 'GET',
      token: /^lwurl_/,
      url: /^\/api\/v1\/signed\/site\/pages\/index\.html\?token=lwurl_/,
    });
    t.ok(
      Math.abs(Date.parse((minted.json as SignedUrl).expiresAt) - Date.now() - 3_600_000) < 5000,
      'default lifetime 1h',
    );
    let response = await browser((minted.json as SignedUrl).url);
    t.equal(response.status, 200);
    t.ok(Buffer.from(await response.arrayBuffer()).equals(page));
    t.equal(response.headers.get('content-disposition'), 'attachment; filename="i.html"');
    t.equal(response.headers.get('content-type'), 'application/octet-stream');
    response = await browser((minted.json as SignedUrl).url, { headers: { Range: 'bytes=4-8' } });
    t.equal(response.status, 206);
    t.equal(await response.text(), 'hello');
    t.equal(
      (await browser((minted.json as SignedUrl).url, { method: 'HEAD' })).status,
      200,
      'a GET URL serves HEAD',
    );

    const token = (minted.json as SignedUrl).token;
    const dot = token.indexOf('.');
    const flip = (text: string, at: number): string =>
      text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
    t.equal(
      (await browser(`/api/v1/signed/site/pages/index.html?token=${flip(token, token.length - 3)}`))
        .status,
      401,
      'a tampered signature',
    );
    t.equal(
      (await browser(`/api/v1/signed/site/pages/index.html?token=${flip(token, dot - 5)}`)).status,
      401,
      'a tampered payload',
    );
    const noToken = await browser('/api/v1/signed/site/pages/index.html');
    t.equal(noToken.status, 401, 'no token');
    // The URL's token is the credential: its 401 says the token is invalid (RFC 6750 §3.1).
    t.equal(
      noToken.headers.get('www-authenticate'),
      'Bearer realm="lightwell", error="invalid_token"',
    );
    t.equal(
      (await browser(`/api/v1/signed/site/pages/index.html?token=${client.token}`)).status,
      401,
      'a bearer token is no URL token',
    );
    const urlTokenAsBearer = await fetch(`${service.publicUrl}/buckets`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    t.equal(urlTokenAsBearer.status, 401, 'a URL token is no bearer token');
    t.equal(urlTokenAsBearer.headers.get('www-authenticate'), 'Bearer realm="lightwell"');
    t.equal(
      (await browser(`/api/v1/signed/site/pages/other.html?token=${token}`)).status,
      403,
      'another key',
    );
    t.equal(
      (
        await browser(`/api/v1/signed/site/pages/index.html?token=${token}`, {
          method: 'PUT',
          body: 'x',
        })
      ).status,
      403,
      'another method',
    );
    await client.request('POST', '/buckets', { json: { name: 'other' } });
    t.equal(
      (await browser(`/api/v1/signed/other/pages/index.html?token=${token}`)).status,
      403,
      'another bucket',
    );
    // A key whose latest version is a delete marker: 404 that says so, as the bearer GET.
    await client.request('POST', '/buckets', {
      json: { name: 'versioned', versioning: 'Enabled' },
    });
    await client.put('versioned', 'gone', 'soon deleted');
    const marker = await client.request('DELETE', '/buckets/versioned/objects/gone');
    const gone = await browser(
      urlOf(await sign({ method: 'GET', bucket: 'versioned', key: 'gone' })),
    );
    t.equal(gone.status, 404, 'a deleted key');
    t.equal(gone.headers.get('x-service-delete-marker'), 'true');
    t.equal(gone.headers.get('x-service-version-id'), marker.headers.get('x-service-version-id'));
  });

  await t.test('minting: scope, other-method fields, ttl clamp, expiry', async (t) => {
    // A refused length names the limit that applies (a pinned type is a stored Content-Type).
    for (const length of [0, 300, 1100]) {
      const refused = await sign({
        method: 'PUT',
        bucket: 'site',
        key: 'x',
        contentType: 't'.repeat(length),
      });
      t.equal(refused.status, 400, `contentType of ${length} characters`);
      t.match((refused.json as { message: string }).message, /1 to 256 /);
    }
    t.equal(
      (await sign({ method: 'PUT', bucket: 'site', key: 'x' }, reader)).status,
      403,
      'a read-only key cannot mint PUT',
    );
    t.equal(
      (await sign({ method: 'GET', bucket: 'site', key: 'pages/index.html' }, reader)).status,
      200,
      'but can mint GET',
    );
    t.equal(
      (await sign({ method: 'PUT', bucket: 'site', key: 'pages/x' }, scoped)).status,
      403,
      'outside the write prefix',
    );
    t.equal(
      (await sign({ method: 'PUT', bucket: 'site', keyPrefix: 'up' }, scoped)).status,
      403,
      'a prefix wider than the scope',
    );
    t.equal(
      (await sign({ method: 'PUT', bucket: 'site', keyPrefix: 'uploads/' }, scoped)).status,
      200,
    );
    for (const body of [
      { method: 'GET', bucket: 'site', key: 'a', contentType: 'text/plain' },
      { method: 'GET', bucket: 'site', keyPrefix: 'a' },
      { method: 'PUT', bucket: 'site', key: 'a', responseContentDisposition: 'inline' },
      { method: 'PUT', bucket: 'site', key: 'a', checksumAlg: 'MD5', checksumVal: 'AAAA' },
      // A JSON value is spelled as the schema's enum, unlike a header name.
      { method: 'PUT', bucket: 'site', key: 'a', checksumAlg: 'crc32c', checksumVal: 'AAAAAA==' },
      { method: 'GET', bucket: 'site', key: 'a', ttlSeconds: 0 },
      { method: 'GET', bucket: 'site', key: '' },
    ])
      t.equal((await sign(body)).status, 400, JSON.stringify(body));
    t.equal((await sign({ method: 'GET', bucket: 'nope', key: 'a' })).status, 404);
    const long = await sign({
      method: 'GET',
      bucket: 'site',
      key: 'pages/index.html',
      ttlSeconds: 30 * 86_400,
    });
    t.ok(
      Date.parse((long.json as SignedUrl).expiresAt) - Date.now() <= 3_600_000 + 2000,
      'ttl clamped to security.max_presign_ttl',
    );
    const short = await sign({
      method: 'GET',
      bucket: 'site',
      key: 'pages/index.html',
      ttlSeconds: 1,
    });
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const expired = await browser((short.json as SignedUrl).url);
    t.equal(expired.status, 401, 'expired');
  });

  await t.test('revoking the minting key invalidates its URLs', async (t) => {
    const doomed = await service.tenant('acme', 'read', admin);
    const url = urlOf(
      await sign({ method: 'GET', bucket: 'site', key: 'pages/index.html' }, doomed),
    );
    t.equal((await browser(url)).status, 200);
    const revoked = await service.admin(
      'POST',
      `/tenants/acme/keys/${doomed.accessKeyId}/revoke`,
      admin,
      { reason: 'test' },
    );
    t.equal(revoked.status, 200);
    t.equal((await browser(url)).status, 401);
  });

  await t.test('PUT constraints: length, type, checksum, idempotency, key prefix', async (t) => {
    const limited = urlOf(
      await sign({ method: 'PUT', bucket: 'site', key: 'limited.bin', contentLengthMax: 1000 }),
    );
    let response = await browser(limited, { method: 'PUT', body: randomBytes(1001) });
    t.equal(response.status, 413, 'over contentLengthMax');
    t.equal((await client.get('site', 'limited.bin')).status, 404, 'nothing was stored');
    const status = await new Promise<number>((resolve, reject) => {
      const request = httpRequest(origin + limited, { method: 'PUT' }, (answer) => {
        answer.resume();
        resolve(answer.statusCode ?? 0);
      });
      request.on('error', reject);
      request.write(randomBytes(600));
      request.end(randomBytes(600));
    });
    t.equal(
      status,
      411,
      'a body without Content-Length is refused: nothing streams past the declared limit',
    );
    t.equal((await client.get('site', 'limited.bin')).status, 404, 'still nothing');
    t.equal(
      (await browser(limited, { method: 'PUT', body: randomBytes(1000) })).status,
      200,
      'exactly the limit',
    );

    const typed = urlOf(
      await sign({ method: 'PUT', bucket: 'site', key: 'typed.txt', contentType: 'text/plain' }),
    );
    t.equal(
      (await browser(typed, { method: 'PUT', body: 'x', headers: { 'Content-Type': 'text/html' } }))
        .status,
      403,
      'another Content-Type',
    );
    t.equal(
      (await browser(typed, { method: 'PUT', body: new Uint8Array(Buffer.from('x')) })).status,
      200,
    );
    t.equal(
      (await client.request('HEAD', '/buckets/site/objects/typed.txt')).headers.get('content-type'),
      'text/plain',
      'the pinned type is stored',
    );

    const body = Buffer.from('checked body');
    const checked = urlOf(
      await sign({
        method: 'PUT',
        bucket: 'site',
        key: 'checked',
        checksumAlg: 'SHA256',
        checksumVal: sha256(body),
      }),
    );
    response = await browser(checked, { method: 'PUT', body: 'another body' });
    t.equal(response.status, 400);
    t.equal(((await response.json()) as { code: string }).code, 'checksum_mismatch');
    t.equal((await client.get('site', 'checked')).status, 404);
    t.equal((await browser(checked, { method: 'PUT', body })).status, 200);

    await client.request('PUT', '/buckets/site/versioning', { json: { status: 'Enabled' } });
    const idem = urlOf(
      await sign({
        method: 'PUT',
        bucket: 'site',
        key: 'once',
        idempotencyKey: 'form-7',
        checksumAlg: 'SHA256',
        checksumVal: sha256('payload'),
      }),
    );
    const first = (await (await browser(idem, { method: 'PUT', body: 'payload' })).json()) as {
      versionId: string;
    };
    const again = (await (await browser(idem, { method: 'PUT', body: 'payload' })).json()) as {
      versionId: string;
    };
    t.equal(again.versionId, first.versionId, 'a retry replays the first result');
    const { versions } = (await client.request('GET', '/buckets/site/versions?prefix=once'))
      .json as { versions: unknown[] };
    t.equal(versions.length, 1, 'stored once');

    const form = urlOf(
      await sign(
        { method: 'PUT', bucket: 'site', keyPrefix: 'uploads/', reason: 'avatar form' },
        scoped,
      ),
    );
    const [path = '', query = ''] = form.split('?');
    t.equal(
      (await browser(`${path}avatar-42.png?${query}`, { method: 'PUT', body: 'png' })).status,
      200,
      'the browser chose the suffix',
    );
    t.equal((await client.get('site', 'uploads/avatar-42.png')).bytes.toString(), 'png');
    t.equal(
      (await browser(`/api/v1/signed/site/pages/evil.html?${query}`, { method: 'PUT', body: 'x' }))
        .status,
      403,
      'outside the prefix',
    );
  });

  await t.test('the reason is on the mint and use audit rows', async (t) => {
    const minted = await sign({
      method: 'GET',
      bucket: 'site',
      key: 'pages/index.html',
      reason: 'invoice-42',
    });
    t.equal((await browser((minted.json as SignedUrl).url)).status, 200);
    let events: Array<{ action: string; reason?: string; actor: string }> = [];
    for (let i = 0; i < 50; i += 1) {
      events = (
        (await service.admin('GET', '/audit?tenant=acme&limit=200', admin)).json as {
          events: typeof events;
        }
      ).events;
      if (
        events.some((event) => event.action === 'getSignedObject' && event.reason === 'invoice-42')
      )
        break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    t.ok(
      events.some(
        (event) =>
          event.action === 'signURL' &&
          event.reason === 'invoice-42' &&
          event.actor === client.accessKeyId,
      ),
      'mint row',
    );
    t.ok(
      events.some(
        (event) =>
          event.action === 'getSignedObject' &&
          event.reason === 'invoice-42' &&
          event.actor === client.accessKeyId,
      ),
      'use row',
    );
    t.ok(
      events.some((event) => event.action === 'putSignedObject' && event.reason === 'avatar form'),
      'the upload row (committed with the upload)',
    );
  });

  await t.test('CORS rules and browser preflight', async (t) => {
    const rules = {
      rules: [
        {
          id: 'app',
          allowedOrigins: ['https://*.example.com'],
          allowedMethods: ['GET', 'PUT'],
          allowedHeaders: ['content-type', 'x-service-checksum-*'],
          exposeHeaders: ['ETag'],
          maxAgeSeconds: 300,
        },
      ],
    };
    t.equal(
      ((await client.request('GET', '/buckets/site/cors')).json as CorsConfig).rules.length,
      0,
      'none yet',
    );
    const put = urlOf(await sign({ method: 'PUT', bucket: 'site', key: 'cors/upload.txt' }));
    const preflight = (url: string, headers: Record<string, string>): Promise<Response> =>
      browser(url, { method: 'OPTIONS', headers });
    const browserHeaders = {
      Origin: 'https://app.example.com',
      'Access-Control-Request-Method': 'PUT',
      'Access-Control-Request-Headers': 'content-type,x-service-checksum-sha256',
    };
    let response = await preflight(put, browserHeaders);
    t.equal(response.status, 403, 'no rules: no CORS');
    t.equal(response.headers.get('access-control-allow-origin'), null);

    t.equal(
      (await reader.request('PUT', '/buckets/site/cors', { json: rules })).status,
      403,
      'CORS needs an admin-scoped key',
    );
    t.equal(
      (
        await client.request('PUT', '/buckets/site/cors', {
          json: { rules: [{ allowedOrigins: ['*'], allowedMethods: ['PATCH'] }] },
        })
      ).status,
      400,
    );
    t.equal(
      (
        await client.request('PUT', '/buckets/site/cors', {
          json: { rules: [{ allowedOrigins: ['https://*.*.com'], allowedMethods: ['GET'] }] },
        })
      ).status,
      400,
    );
    // The served document states the bounds the server holds to.
    const served = (await (await fetch(`${service.publicUrl}/openapi.json`)).json()) as {
      paths: Record<
        string,
        Record<string, { requestBody: { content: Record<string, { schema: Schema }> } }>
      >;
    };
    const corsPut = served.paths['/buckets/{bucket}/cors']?.['put'];
    const body = corsPut?.requestBody.content['application/json']?.schema;
    if (!body) throw new RangeError('PUT /buckets/{bucket}/cors has no JSON body schema');
    const ruleList = body.properties['rules'] as Schema & { items: Schema };
    t.match(ruleList, { minItems: 1, maxItems: 100 }, 'rules: 1 to 100');
    for (const field of ['allowedOrigins', 'allowedMethods'])
      t.match(ruleList.items.properties[field], { minItems: 1, maxItems: 100 }, field);
    const rule = { allowedOrigins: ['*'], allowedMethods: ['GET'] };
    const outOfBounds: unknown[] = [
      { rules: [] },
      { rules: Array.from({ length: 101 }, () => rule) },
      { rules: [{ ...rule, allowedOrigins: [] }] },
      { rules: [{ ...rule, allowedMethods: [] }] },
      { rules: [{ ...rule, allowedHeaders: Array.from({ length: 101 }, (_, i) => `x-${i}`) }] },
    ];
    for (const json of outOfBounds)
      t.equal((await client.request('PUT', '/buckets/site/cors', { json })).status, 400);
    t.equal((await client.request('PUT', '/buckets/site/cors', { json: rules })).status, 200);
    t.same(
      ((await reader.request('GET', '/buckets/site/cors')).json as CorsConfig).rules[0]
        ?.allowedOrigins,
      ['https://*.example.com'],
    );

    response = await preflight(put, browserHeaders);
    t.equal(response.status, 204);
    t.equal(response.headers.get('access-control-allow-origin'), 'https://app.example.com');
    t.match(response.headers.get('access-control-allow-methods'), /PUT/);
    t.equal(
      response.headers.get('access-control-allow-headers'),
      'content-type, x-service-checksum-sha256',
    );
    t.equal(response.headers.get('access-control-max-age'), '300');

    for (const [why, url, headers] of [
      ['an origin no rule allows', put, { ...browserHeaders, Origin: 'https://evil.test' }],
      [
        'a header no rule allows',
        put,
        { ...browserHeaders, 'Access-Control-Request-Headers': 'authorization' },
      ],
      [
        'a method the token does not authorize',
        put,
        { ...browserHeaders, 'Access-Control-Request-Method': 'GET' },
      ],
      [
        'a resource the token does not cover',
        put.replace('upload.txt', 'other.txt'),
        browserHeaders,
      ],
    ] as const) {
      response = await preflight(url, headers);
      t.equal(response.status, 403, why);
      t.equal(response.headers.get('access-control-allow-origin'), null, `${why}: no CORS headers`);
    }
    response = await preflight(put.replace(/.{4}$/, 'AAAA'), browserHeaders);
    t.equal(response.status, 401, 'a tampered token: CORS never grants access');
    t.equal(response.headers.get('access-control-allow-origin'), null);
    t.equal(
      (await preflight(put, { Origin: 'https://app.example.com' })).status,
      400,
      'not a preflight',
    );

    response = await browser(put, {
      method: 'PUT',
      body: 'from the browser',
      headers: { Origin: 'https://app.example.com', 'Content-Type': 'text/plain' },
    });
    t.equal(response.status, 200);
    t.equal(
      response.headers.get('access-control-allow-origin'),
      'https://app.example.com',
      'the actual response carries CORS too',
    );
    t.equal(response.headers.get('access-control-expose-headers'), 'ETag');
    const get = urlOf(await sign({ method: 'GET', bucket: 'site', key: 'cors/upload.txt' }));
    response = await browser(get, { headers: { Origin: 'https://evil.test' } });
    t.equal(response.status, 200, 'CORS never takes access away from a valid token either');
    t.equal(response.headers.get('access-control-allow-origin'), null);
    // With rules on the bucket every answer depends on Origin, matched or not, or absent: a
    // shared cache must not hand this one to an allowed origin.
    t.equal(response.headers.get('vary'), 'Origin', 'Vary: Origin for an origin no rule allows');
    response = await browser(get);
    t.equal(response.headers.get('vary'), 'Origin', 'and for a request without Origin');
    // A refusal after the token was accepted carries the rule's headers too, so the page can
    // read why: a missing object, and a body over the URL's limit.
    const missing = urlOf(await sign({ method: 'GET', bucket: 'site', key: 'cors/missing' }));
    const small = urlOf(
      await sign({ method: 'PUT', bucket: 'site', key: 'cors/small', contentLengthMax: 2 }),
    );
    for (const [why, url, init] of [
      ['404', missing, { method: 'GET' }],
      ['413', small, { method: 'PUT', body: 'abc' }],
    ] as const) {
      response = await browser(url, {
        ...init,
        headers: { Origin: 'https://app.example.com', 'Content-Type': 'text/plain' },
      });
      t.equal(String(response.status), why);
      t.equal(
        response.headers.get('access-control-allow-origin'),
        'https://app.example.com',
        `a ${why} carries CORS`,
      );
      t.match(await response.json(), { code: /./ });
    }

    t.equal((await reader.request('DELETE', '/buckets/site/cors')).status, 403);
    t.equal((await client.request('DELETE', '/buckets/site/cors')).status, 204);
    t.equal((await preflight(put, browserHeaders)).status, 403, 'cleared');
  });
});
