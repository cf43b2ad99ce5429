// Goal: a misspelt field or parameter is refused, never silently ignored, on both planes, and
// nothing is changed by the refused request: a batch delete item with `versionID` (which would
// have deleted the current version) and a tenant create with `?dryrun=true` (which would have
// created the tenant) answer 400; every JSON body of the documents refuses a field it does not
// declare, at any depth; reads still ignore unknown query parameters; the served documents say
// `additionalProperties: false` for each closed request body. Also the clearer answers of the
// same review: `includeDeleted=maybe` and a versionIdMarker without its keyMarker are 400, a tag
// without a value and a repeated part number are named as such; a listParts answer can be sent
// back to complete an upload; a request without credentials is a 401 whatever its query; null
// in a field that is not nullable is a 400 naming the field, not the field left out.
// Method: `lightwell serve` on loopback; fetch against both listeners, then the state read back.
import t from 'tap';
import { Service, type DataClient } from '../helpers/service.js';

interface Problem {
  readonly code: string;
  readonly message: string;
}

const BUCKET = 'strict';

t.test('strict input', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const owner = service.adminToken();
  const client: DataClient = await service.tenant('strict');
  t.equal((await client.request('POST', '/buckets', { json: { name: BUCKET } })).status, 201);
  const message = (json: unknown): string => (json as Problem).message;

  await t.test('a misspelt versionId in a batch delete deletes nothing', async (t) => {
    await client.request('PUT', `/buckets/${BUCKET}/versioning`, { json: { status: 'Enabled' } });
    const first = await client.put(BUCKET, 'typo.txt', 'one');
    await client.put(BUCKET, 'typo.txt', 'two');
    const versionId = (first.json as { versionId: string }).versionId;
    const refused = await client.request('POST', `/buckets/${BUCKET}/objects:batchDelete`, {
      json: { objects: [{ key: 'typo.txt', versionID: versionId }] },
    });
    t.equal(refused.status, 400);
    t.equal((refused.json as Problem).code, 'bad_request');
    t.match(message(refused.json), /objects\[0\]: unknown field "versionID"/);
    const read = await client.get(BUCKET, 'typo.txt');
    t.equal(read.status, 200, 'no delete marker was written');
    t.equal(read.bytes.toString(), 'two');
    const versions = await client.request('GET', `/buckets/${BUCKET}/versions?prefix=typo`);
    t.equal((versions.json as { versions: unknown[] }).versions.length, 2, 'both versions stay');
  });

  await t.test('a misspelt dryRun creates nothing', async (t) => {
    const refused = await service.admin('POST', '/tenants?dryrun=true', owner, { id: 'typo-dry' });
    t.equal(refused.status, 400);
    t.match(message(refused.json), /unknown query parameter "dryrun"/);
    t.equal((await service.admin('GET', '/tenants/typo-dry', owner)).status, 404);
    const dry = await service.admin('POST', '/tenants?dryRun=true', owner, { id: 'typo-dry' });
    t.equal(dry.status, 200, 'the parameter spelt right is a dry run');
    t.equal((await service.admin('GET', '/tenants/typo-dry', owner)).status, 404);
  });

  await t.test('a parameter given twice changes nothing', async (t) => {
    const refused = await service.admin('POST', '/tenants?dryRun=false&dryRun=true', owner, {
      id: 'twice-dry',
    });
    t.equal(refused.status, 400);
    t.match(message(refused.json), /query parameter "dryRun" is given more than once/);
    t.equal((await service.admin('GET', '/tenants/twice-dry', owner)).status, 404);
    const first = await client.put(BUCKET, 'twice.txt', 'one');
    const second = await client.put(BUCKET, 'twice.txt', 'two');
    const [a = '', b = ''] = [first, second].map(
      (r) => (r.json as { versionId: string }).versionId,
    );
    const path = `/buckets/${BUCKET}/objects/twice.txt?versionId=${a}&versionId=${b}`;
    t.equal((await client.request('DELETE', path)).status, 400, 'a delete of two versions');
    t.equal((await client.request('GET', path)).status, 400, 'a read of two versions');
    const versions = await client.request('GET', `/buckets/${BUCKET}/versions?prefix=twice`);
    t.equal((versions.json as { versions: unknown[] }).versions.length, 2, 'both versions stay');
  });

  await t.test('unknown fields are refused on every JSON body, at any depth', async (t) => {
    const data: Array<[string, string, unknown]> = [
      ['POST', '/buckets', { name: 'other-bucket', versoning: 'Enabled' }],
      ['PUT', `/buckets/${BUCKET}/versioning`, { status: 'Enabled', mfa: true }],
      [
        'PUT',
        `/buckets/${BUCKET}/object-tags/typo.txt`,
        { tags: [{ key: 'a', value: 'b', x: 1 }] },
      ],
      ['POST', '/auth/token', { accessKeyId: client.accessKeyId, secretKey: 'x', ttl: 60 }],
    ];
    for (const [method, path, json] of data) {
      const answer = await client.request(method, path, { json });
      t.equal(answer.status, 400, `${method} ${path}`);
      t.match(message(answer.json), /unknown field/, `${method} ${path}: says which`);
    }
    t.equal(
      (await client.request('GET', `/buckets/${BUCKET}`)).status,
      200,
      'the bucket is as it was',
    );
    t.equal((await client.request('GET', '/buckets/other-bucket')).status, 404, 'not created');
    const admin: Array<[string, string, unknown]> = [
      ['POST', '/tenants', { id: 'typo-tenant', nmae: 'Typo' }],
      ['POST', '/tenants/strict/accounts', { id: 'typo-account', label: 'x' }],
      ['POST', '/tenants/strict/keys', { accountId: 'app', scopes: 'read', scope: 'write' }],
    ];
    for (const [method, path, json] of admin) {
      const answer = await service.admin(method, path, owner, json);
      t.equal(answer.status, 400, `admin ${method} ${path}`);
      t.match(message(answer.json), /unknown field/);
    }
    t.equal((await service.admin('GET', '/tenants/typo-tenant', owner)).status, 404);
    const withReason = await service.admin('POST', '/tenants', owner, {
      id: 'with-reason',
      reason: 'onboarding ticket 42',
    });
    t.equal(withReason.status, 201, 'every admin mutation takes a reason for the audit log');
  });

  await t.test('null is not a left-out field, on either plane', async (t) => {
    const copy = `/buckets/${BUCKET}/object-copy/copied.txt`;
    const source = { sourceBucket: BUCKET, sourceKey: 'typo.txt' };
    const data: Array<[string, string, Record<string, unknown>, string]> = [
      ['POST', copy, { ...source, sourceVersionId: null }, 'sourceVersionId'],
      ['POST', copy, { ...source, metadataDirective: null }, 'metadataDirective'],
      ['POST', copy, { ...source, metadataDirective: 'REPLACE', contentType: null }, 'contentType'],
      ['POST', copy, { ...source, ifMatch: null }, 'ifMatch'],
      ['POST', copy, { ...source, ifNoneMatch: null }, 'ifNoneMatch'],
      ['POST', copy, { ...source, requireMatchEtag: null }, 'requireMatchEtag'],
      ['POST', `/buckets/${BUCKET}/multipart/nulls.bin`, { contentType: null }, 'contentType'],
      ['POST', `/buckets/${BUCKET}/multipart/nulls.bin`, { metadata: null }, 'metadata'],
      ['POST', `/buckets/${BUCKET}/multipart/x/complete/y`, { contentType: null }, 'contentType'],
    ];
    for (const [method, path, json, field] of data) {
      const answer = await client.request(method, path, { json });
      t.equal(answer.status, 400, `${method} ${path} ${field}`);
      t.equal((answer.json as Problem).code, 'bad_request');
      t.match(message(answer.json), new RegExp(`^${field} must not be null`), 'names the field');
    }
    t.equal((await client.get(BUCKET, 'copied.txt')).status, 404, 'nothing was copied');
    const uploads = await client.request('GET', `/buckets/${BUCKET}/multipart?prefix=nulls`);
    t.same((uploads.json as { uploads: unknown[] }).uploads, [], 'no upload was created');
    const signed = await client.request('POST', '/sign-url', {
      json: { method: 'GET', bucket: BUCKET, key: 'typo.txt', reason: null },
    });
    t.equal(signed.status, 400, 'as sign-url always did');

    const keyPath = `/tenants/strict/keys/${client.accessKeyId}/rotate`;
    const admin: Array<[string, Record<string, unknown>, string]> = [
      ['/tenants', { id: 'null-name', name: null }, 'name'],
      ['/tenants', { id: 'null-reason', reason: null }, 'reason'],
      ['/tenants/strict/accounts', { id: 'null-account', name: null }, 'name'],
      [
        '/tenants/strict/keys',
        { accountId: 'app', scopes: 'read', externalRef: null },
        'externalRef',
      ],
      ['/tenants/strict/keys', { accountId: 'app', scopes: 'read', expiresAt: null }, 'expiresAt'],
      [keyPath, { scopes: null }, 'scopes'],
      [keyPath, { expiresAt: null }, 'expiresAt'],
      ['/tenants/strict/disable', { reason: null }, 'reason'],
      ['/cluster/consensus/join', { id: 'n2', address: 'h:1', reason: 'r', zone: null }, 'zone'],
      ['/cluster/consensus/drain', { id: 'n2', reason: 'r', forceLost: null }, 'forceLost'],
      [
        '/cluster/repair/rebalance',
        { tenantId: 'strict', reason: 'r', confirmTenant: 'strict', bucketName: null },
        'bucketName',
      ],
    ];
    for (const [path, json, field] of admin) {
      const answer = await service.admin('POST', path, owner, json);
      t.equal(answer.status, 400, `admin POST ${path} ${field}`);
      t.equal((answer.json as Problem).code, 'bad_request');
      t.match(message(answer.json), new RegExp(`^${field} must not be null`), 'names the field');
    }
    t.equal((await service.admin('GET', '/tenants/null-name', owner)).status, 404, 'not created');
    const tenant = await service.admin('GET', '/tenants/strict', owner);
    t.equal((tenant.json as { state: string }).state, 'active', 'not disabled');
    const cleared = await service.admin('PUT', '/tenants/strict/quota', owner, {
      maxBytes: null,
      maxObjects: 10,
    });
    t.equal(cleared.status, 200, 'a field the document says is nullable takes null');
  });

  await t.test('reads ignore unknown query parameters', async (t) => {
    t.equal((await client.request('GET', `/buckets/${BUCKET}/objects?cachebust=1`)).status, 200);
    t.equal((await client.get(BUCKET, 'typo.txt?_=2')).status, 404, 'part of the key, not a query');
    t.equal((await client.request('GET', `/buckets/${BUCKET}/objects/typo.txt?x=1`)).status, 200);
    t.equal((await service.admin('GET', '/tenants?view=all', owner)).status, 200);
  });

  await t.test('clearer answers for other malformed requests', async (t) => {
    const listed = await service.admin('GET', '/tenants?includeDeleted=maybe', owner);
    t.equal(listed.status, 400);
    t.match(message(listed.json), /includeDeleted must be true or false/);
    const marker = await client.request(
      'GET',
      `/buckets/${BUCKET}/versions?versionIdMarker=0000000000000001`,
    );
    t.equal(marker.status, 400);
    t.match(message(marker.json), /keyMarker/);
    const tag = await client.request('PUT', `/buckets/${BUCKET}/object-tags/typo.txt`, {
      json: { tags: [{ key: 'k' }] },
    });
    t.equal(tag.status, 400);
    t.match(message(tag.json), /the tag "k" needs a string value/);
    const uploads = await client.request('GET', `/buckets/${BUCKET}/multipart?uploadIdMarker=x`);
    t.equal(uploads.status, 400);
    t.match(message(uploads.json), /keyMarker/);
  });

  await t.test('a repeated part number is named as such', async (t) => {
    const created = await client.request('POST', `/buckets/${BUCKET}/multipart/big.bin`, {
      json: {},
    });
    t.equal(created.status, 201);
    const uploadId = (created.json as { uploadId: string }).uploadId;
    const part = await client.request(
      'PUT',
      `/buckets/${BUCKET}/multipart/${uploadId}/parts/1/big.bin`,
      { body: 'small part' },
    );
    t.equal(part.status, 200);
    const etag = (part.json as { etag: string }).etag;
    const completed = await client.request(
      'POST',
      `/buckets/${BUCKET}/multipart/${uploadId}/complete/big.bin`,
      {
        json: {
          parts: [
            { partNumber: 1, etag },
            { partNumber: 1, etag },
          ],
        },
      },
    );
    t.equal(completed.status, 400);
    t.match(message(completed.json), /strictly ascending partNumber order/);
    const listed = await client.request(
      'GET',
      `/buckets/${BUCKET}/multipart/${uploadId}/parts/big.bin`,
    );
    const done = await client.request(
      'POST',
      `/buckets/${BUCKET}/multipart/${uploadId}/complete/big.bin`,
      { json: { parts: (listed.json as { parts: unknown[] }).parts } },
    );
    t.equal(done.status, 200, 'the listParts entries, sent back as they came');
  });

  await t.test('a create through the complete path keeps its own fields', async (t) => {
    const created = await client.request(
      'POST',
      `/buckets/${BUCKET}/multipart/not-an-upload/complete/x`,
      { json: { contentType: 'text/plain' } },
    );
    t.equal(created.status, 201, 'an upload of the key not-an-upload/complete/x');
  });

  await t.test('without credentials the answer is 401, whatever the query', async (t) => {
    const response = await fetch(`${service.adminUrl}/tenants?foo=1`, {
      method: 'POST',
      body: JSON.stringify({ id: 'no-token' }),
    });
    t.equal(response.status, 401);
    const data = await fetch(`${service.publicUrl}/buckets/${BUCKET}/objects/x?foo=1`, {
      method: 'DELETE',
    });
    t.equal(data.status, 401);
  });

  await t.test('the documents publish closed request bodies', async (t) => {
    for (const url of [`${service.publicUrl}/openapi.json`, `${service.adminUrl}/openapi.json`]) {
      const document = (await (await fetch(url)).json()) as {
        paths: Record<
          string,
          Record<
            string,
            { requestBody?: { content: Record<string, { schema: Record<string, unknown> }> } }
          >
        >;
      };
      let closed = 0;
      for (const [path, operations] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          const schema = operation.requestBody?.content['application/json']?.schema;
          if (!schema) continue;
          t.equal(schema['additionalProperties'], false, `${method} ${path}`);
          closed += 1;
        }
      }
      t.ok(closed > 5, `${url}: ${closed} closed bodies`);
    }
  });
});
