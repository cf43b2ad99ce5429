// Goal: the data-plane rules of spec/data-api.md beyond the byte path behave as specified:
// versioning (S3 semantics with null versions and delete markers), the versions listing, tags
// (S3's limits, no control characters), retention and legal hold (extend-only, gating deletes),
// server-side copy, batch delete, idempotency keys (a failed request frees its key before it
// answers), conditional writes decided atomically, read preconditions and conditional deletes,
// checksum verification.
// Method: one real service on loopback; every rule is driven through HTTP as a client would, and
// the index is read where only it can tell.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Service, type DataClient, type ObjectAnswer, type Problem } from '../helpers/service.js';

/** The fields of a versions page that these tests read. */
interface VersionsPage {
  versions: Array<{ key: string; versionId: string; isLatest: boolean }>;
  isTruncated: boolean;
  /** Set when the page is truncated. */
  nextKeyMarker: string;
  nextVersionIdMarker: string;
}
import { EngineClient } from '../../src/engine/protocol.js';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB } from '../../src/engine/index/schema.js';
import { crc32c } from '../../src/util/crc32c.js';

const sha256 = (body: Buffer | string): string =>
  createHash('sha256').update(body).digest('base64');
const crc32cBase64 = (body: Buffer): string => {
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc32c(body) >>> 0);
  return digest.toString('base64');
};

t.test('data-plane API', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const client = await service.tenant('acme');

  await t.test('versioning: Unversioned → Enabled ↔ Suspended with null versions', async (t) => {
    t.equal((await client.request('POST', '/buckets', { json: { name: 'ver' } })).status, 201);
    t.same((await client.request('GET', '/buckets/ver/versioning')).json, {
      status: 'Unversioned',
    });
    await client.put('ver', 'k', 'null-1');
    t.equal(
      (await client.request('PUT', '/buckets/ver/versioning', { json: { status: 'Enabled' } }))
        .status,
      200,
    );
    const first = await client.put('ver', 'k', 'v1');
    const v1 = (first.json as ObjectAnswer).versionId;
    t.equal(first.headers.get('x-service-version-id'), v1, 'a write names its version');
    const v2 = ((await client.put('ver', 'k', 'v2')).json as ObjectAnswer).versionId;
    t.not(v1, v2);
    t.equal((await client.get('ver', 'k')).bytes.toString(), 'v2');
    t.equal(
      (await client.request('GET', `/buckets/ver/objects/k?versionId=${v1}`)).bytes.toString(),
      'v1',
    );
    t.equal(
      (await client.request('GET', '/buckets/ver/objects/k?versionId=null')).bytes.toString(),
      'null-1',
    );
    // A version id of the right form that no sequence number can have (over 2^53) is refused as
    // malformed on every route that takes one, never a 500.
    for (const [method, path] of [
      ['GET', 'objects'],
      ['HEAD', 'objects'],
      ['DELETE', 'objects'],
      ['GET', 'object-tags'],
    ] as const) {
      const answer = await client.request(
        method,
        `/buckets/ver/${path}/k?versionId=ffffffffffffffff`,
      );
      t.equal(answer.status, 400, `${method} ${path}: an impossible version id`);
    }
    const del = await client.request('DELETE', '/buckets/ver/objects/k');
    t.equal(del.status, 204);
    t.equal(del.headers.get('x-service-delete-marker'), 'true');
    const hidden = await client.get('ver', 'k');
    t.equal(hidden.status, 404, 'a delete marker hides the key');
    t.equal(hidden.headers.get('x-service-delete-marker'), 'true', 'and the 404 says so');
    const markerId = del.headers.get('x-service-version-id') ?? '';
    t.equal(hidden.headers.get('x-service-version-id'), markerId, "with the marker's version id");
    for (const method of ['GET', 'HEAD']) {
      const marker = await client.request(method, `/buckets/ver/objects/k?versionId=${markerId}`);
      t.equal(marker.status, 405, `${method} of the delete marker's version, as on S3`);
      t.equal(marker.headers.get('allow'), 'DELETE');
      t.equal(marker.headers.get('x-service-delete-marker'), 'true');
    }
    t.equal(
      (await client.get('ver', 'never-written')).headers.get('x-service-delete-marker'),
      null,
      'a key that never existed is a plain 404',
    );
    const { versions } = (await client.request('GET', '/buckets/ver/versions'))
      .json as VersionsPage;
    t.equal(versions.length, 4);
    t.match(versions[0], { key: 'k', isLatest: true, isDeleteMarker: true });
    t.same(
      versions.map((v) => v.isLatest),
      [true, false, false, false],
    );
    // Paging with markers visits each version once.
    const page1 = (await client.request('GET', '/buckets/ver/versions?maxKeys=2'))
      .json as VersionsPage;
    t.equal(page1.isTruncated, true);
    const page2 = (
      await client.request(
        'GET',
        `/buckets/ver/versions?maxKeys=2&keyMarker=${page1.nextKeyMarker}&versionIdMarker=${page1.nextVersionIdMarker}`,
      )
    ).json as VersionsPage;
    t.same(
      [...page1.versions, ...page2.versions].map((v) => v.versionId),
      versions.map((v) => v.versionId),
    );
    // A page that resumes after a version deleted since still marks the key's newest as latest.
    const newest = versions[0]!;
    const resumed = (
      await client.request(
        'GET',
        '/buckets/ver/versions?keyMarker=k&versionIdMarker=0000ffffffffffff',
      )
    ).json as VersionsPage;
    t.same(
      resumed.versions.map((v) => [v.versionId, v.isLatest]),
      versions.map((v) => [v.versionId, v.versionId === newest.versionId]),
      'a marker newer than every version: the newest is still the latest',
    );
    const afterNewest = (
      await client.request(
        'GET',
        `/buckets/ver/versions?keyMarker=k&versionIdMarker=${newest.versionId}`,
      )
    ).json as VersionsPage;
    t.same(
      afterNewest.versions.map((v) => v.isLatest),
      versions.slice(1).map(() => false),
      'after the newest, none is',
    );
    t.equal(
      (await client.request('GET', '/buckets/ver/versions?keyMarker=k&versionIdMarker=zz')).status,
      400,
      'a malformed versionIdMarker',
    );
    const emptyMarkers = await client.request(
      'GET',
      '/buckets/ver/versions?keyMarker=&versionIdMarker=',
    );
    t.equal(emptyMarkers.status, 200, 'empty markers are absent ones');
    t.same(
      (emptyMarkers.json as VersionsPage).versions.map((v) => v.versionId),
      versions.map((v) => v.versionId),
      'and the listing starts at the first key',
    );
    // Removing the marker by id brings v2 back.
    t.equal(
      (await client.request('DELETE', `/buckets/ver/objects/k?versionId=${versions[0]!.versionId}`))
        .status,
      204,
    );
    t.equal((await client.get('ver', 'k')).bytes.toString(), 'v2');
    // Suspended writes replace the null version and keep the others.
    await client.request('PUT', '/buckets/ver/versioning', { json: { status: 'Suspended' } });
    t.equal((await client.put('ver', 'k', 'null-2')).status, 200);
    const after = ((await client.request('GET', '/buckets/ver/versions')).json as VersionsPage)
      .versions;
    t.same(
      after.map((v: { versionId: string }) => v.versionId).filter((id: string) => id === 'null')
        .length,
      1,
    );
    t.equal(after.length, 3);
    t.equal(
      (await client.request('PUT', '/buckets/ver/versioning', { json: { status: 'Sometimes' } }))
        .status,
      400,
    );
    t.equal(
      ((await client.request('DELETE', '/buckets/ver')).json as Problem).code,
      'bucket_not_empty',
    );
  });

  await t.test('continuation tokens resume only the listing that issued them', async (t) => {
    await client.request('POST', '/buckets', { json: { name: 'paged' } });
    for (const key of ['a/1', 'a/2', 'a/3', 'b/1']) await client.put('paged', key, key);
    type Page = { objects: Array<{ key: string }>; nextContinuationToken?: string };
    const list = async (query: string) => client.request('GET', `/buckets/paged/objects?${query}`);
    const first = (await list('prefix=a/&maxKeys=2')).json as Page;
    t.same(
      first.objects.map((o) => o.key),
      ['a/1', 'a/2'],
    );
    const token = first.nextContinuationToken ?? '';
    const rest = (await list(`prefix=a/&maxKeys=5&continuationToken=${token}`)).json as Page;
    t.same(
      rest.objects.map((o) => o.key),
      ['a/3'],
      'the page size may change between pages',
    );
    t.equal(rest.nextContinuationToken, undefined);
    const bytes = Buffer.from(token, 'base64url');
    bytes[4] = (bytes[4] ?? 0) ^ 1; // the position's last byte: 'a/2' → 'a/3'
    for (const [query, why] of [
      [`prefix=a/&continuationToken=${bytes.toString('base64url')}`, 'an edited token'],
      [`prefix=b/&continuationToken=${token}`, 'another prefix'],
      [`prefix=a/&delimiter=/&continuationToken=${token}`, 'another delimiter'],
      [`continuationToken=${Buffer.from('ka/2').toString('base64url')}`, 'an unsigned one'],
    ] as const) {
      const answer = await list(query);
      t.equal(answer.status, 400, why);
      t.equal((answer.json as Problem).code, 'bad_request', why);
    }
  });

  await t.test('tags', async (t) => {
    await client.request('POST', '/buckets', { json: { name: 'tagged' } });
    await client.put('tagged', 'o', 'x');
    t.same((await client.request('GET', '/buckets/tagged/object-tags/o')).json, { tags: [] });
    const tags = [
      { key: 'team', value: 'ingest' },
      { key: 'tier', value: 'hot' },
    ];
    t.equal(
      (await client.request('PUT', '/buckets/tagged/object-tags/o', { json: { tags } })).status,
      200,
    );
    t.same((await client.request('GET', '/buckets/tagged/object-tags/o')).json, { tags });
    const tooMany = Array.from({ length: 11 }, (_, i) => ({ key: `k${i}`, value: 'v' }));
    t.equal(
      (await client.request('PUT', '/buckets/tagged/object-tags/o', { json: { tags: tooMany } }))
        .status,
      400,
    );
    t.equal(
      (
        await client.request('PUT', '/buckets/tagged/object-tags/o', {
          json: { tags: [{ key: 'x'.repeat(129), value: '' }] },
        })
      ).status,
      400,
    );
    // Characters are code points, as S3 counts them: 128 emoji are 256 UTF-16 units.
    const emoji = [{ key: '\u{1F600}'.repeat(128), value: '\u{1F600}'.repeat(256) }];
    t.equal(
      (await client.request('PUT', '/buckets/tagged/object-tags/o', { json: { tags: emoji } }))
        .status,
      200,
    );
    // No C0 control character or DEL in a key or value; `aws:` keys are not reserved
    // (DECISIONS.md takes S3's limits, not its prefix rule).
    const controls: Array<[{ key: string; value: string }, RegExp]> = [
      [{ key: 'a\u0000b', value: 'v' }, /^a tag key must not contain control characters/],
      [{ key: 'k', value: 'line\r\nforged' }, /^the value of tag "k" must not contain control/],
      [{ key: 'tab\tkey', value: '' }, /^a tag key must not contain control characters/],
      [{ key: 'k', value: 'del\u007f' }, /U\+007F/],
    ];
    for (const [tag, message] of controls) {
      const response = await client.request('PUT', '/buckets/tagged/object-tags/o', {
        json: { tags: [tag] },
      });
      t.equal(response.status, 400, JSON.stringify(tag));
      t.match((response.json as Problem).message, message);
    }
    t.same((await client.request('GET', '/buckets/tagged/object-tags/o')).json, { tags: emoji });
    const aws = [{ key: 'aws:cloudformation:stack-name', value: 'mine' }];
    t.equal(
      (await client.request('PUT', '/buckets/tagged/object-tags/o', { json: { tags: aws } }))
        .status,
      200,
      'an aws: key is an ordinary key here',
    );
    t.equal((await client.request('DELETE', '/buckets/tagged/object-tags/o')).status, 204);
    t.same((await client.request('GET', '/buckets/tagged/object-tags/o')).json, { tags: [] });
    t.equal((await client.request('GET', '/buckets/tagged/object-tags/missing')).status, 404);
  });

  await t.test('object lock: retention extends only, legal hold, deletes gated', async (t) => {
    const created = await client.request('POST', '/buckets', {
      json: { name: 'locked', objectLock: true },
    });
    t.match(
      created.json,
      { versioning: 'Enabled', objectLock: true },
      'object lock implies versioning',
    );
    const versionId = ((await client.put('locked', 'doc', 'keep me')).json as ObjectAnswer)
      .versionId;
    const nextYear = new Date().getUTCFullYear() + 1;
    for (const loose of [
      `${nextYear}-02-30T00:00:00Z`, // Date.parse rolls it over to March
      `${nextYear}-01-01T24:00:00Z`,
      `${nextYear}-01-01T00:00:00`, // no offset: the server's local time
      `Jan 1 ${nextYear}`,
      `${nextYear}-01-01`,
      '+275760-09-13T00:00:00Z',
    ]) {
      const refused = await client.request('PUT', '/buckets/locked/object-retention/doc', {
        json: { mode: 'COMPLIANCE', retainUntil: loose },
      });
      t.equal(refused.status, 400, `retainUntil ${loose}`);
    }
    t.equal(
      (await client.request('GET', '/buckets/locked/object-retention/doc')).status,
      404,
      'no retention was set by the refused requests',
    );
    const until = new Date(Date.now() + 3_600_000).toISOString();
    let response = await client.request('PUT', '/buckets/locked/object-retention/doc', {
      json: { mode: 'COMPLIANCE', retainUntil: until },
    });
    t.equal(response.status, 200);
    t.same((await client.request('GET', '/buckets/locked/object-retention/doc')).json, {
      mode: 'COMPLIANCE',
      retainUntil: until,
    });
    const shorter = new Date(Date.now() + 60_000).toISOString();
    response = await client.request('PUT', '/buckets/locked/object-retention/doc', {
      json: { mode: 'COMPLIANCE', retainUntil: shorter },
    });
    t.equal(response.status, 403, 'retention can never be shortened');
    t.same(
      (
        (await client.request('GET', '/buckets/locked/object-retention/doc')).json as {
          retainUntil: string;
        }
      ).retainUntil,
      until,
      'unchanged',
    );
    response = await client.request('DELETE', `/buckets/locked/objects/doc?versionId=${versionId}`);
    t.equal(response.status, 403, 'a retained version cannot be deleted');
    t.equal(
      (await client.request('DELETE', '/buckets/locked/objects/doc')).status,
      204,
      'a delete marker is allowed',
    );
    t.equal(
      (
        await client.request('GET', `/buckets/locked/objects/doc?versionId=${versionId}`)
      ).bytes.toString(),
      'keep me',
    );

    const held = ((await client.put('locked', 'held', 'x')).json as ObjectAnswer).versionId;
    t.same((await client.request('GET', '/buckets/locked/object-legal-hold/held')).json, {
      status: 'OFF',
    });
    t.equal(
      (
        await client.request('PUT', '/buckets/locked/object-legal-hold/held', {
          json: { status: 'ON' },
        })
      ).status,
      200,
    );
    response = await client.request('HEAD', '/buckets/locked/objects/held');
    t.equal(response.headers.get('x-service-object-lock-legal-hold'), 'ON');
    t.equal(
      (await client.request('DELETE', `/buckets/locked/objects/held?versionId=${held}`)).status,
      403,
    );
    await client.request('PUT', '/buckets/locked/object-legal-hold/held', {
      json: { status: 'OFF' },
    });
    t.equal(
      (await client.request('DELETE', `/buckets/locked/objects/held?versionId=${held}`)).status,
      204,
    );
    t.equal(
      (await client.request('PUT', '/buckets/locked/versioning', { json: { status: 'Suspended' } }))
        .status,
      409,
    );
    await client.request('POST', '/buckets', { json: { name: 'plain' } });
    await client.put('plain', 'p', 'x');
    t.equal(
      (
        await client.request('PUT', '/buckets/plain/object-legal-hold/p', {
          json: { status: 'ON' },
        })
      ).status,
      400,
    );
    for (const what of ['object-legal-hold', 'object-retention'])
      t.equal(
        (await client.request('GET', `/buckets/plain/${what}/p`)).status,
        400,
        `GET ${what} without object lock`,
      );
  });

  await t.test('copy shares chunks and honours preconditions', async (t) => {
    await client.request('POST', '/buckets', { json: { name: 'copies' } });
    const body = randomBytes(3 * 1024 * 1024);
    const source = (
      await client.put('copies', 'src', body, {
        'Content-Type': 'application/x-src',
        'X-Service-Meta-A': '1',
      })
    ).json as ObjectAnswer;
    let response = await client.request('POST', '/buckets/copies/object-copy/dst', {
      json: { sourceBucket: 'copies', sourceKey: 'src' },
    });
    t.equal(response.status, 200);
    t.match(response.json, {
      key: 'dst',
      size: body.length,
      etag: source.etag,
      contentType: 'application/x-src',
      metadata: { a: '1' },
    });
    t.ok((await client.get('copies', 'dst')).bytes.equals(body));
    response = await client.request('POST', '/buckets/copies/object-copy/dst2', {
      json: {
        sourceBucket: 'copies',
        sourceKey: 'src',
        metadataDirective: 'REPLACE',
        contentType: 'text/plain',
        metadata: { b: '2' },
      },
    });
    t.match(response.json, { contentType: 'text/plain', metadata: { b: '2' } });
    // Tags follow the source with either directive, as S3's tagging directive defaults to COPY.
    await client.request('PUT', '/buckets/copies/object-tags/src', {
      json: { tags: [{ key: 't', value: '1' }] },
    });
    for (const metadataDirective of ['COPY', 'REPLACE']) {
      const key = `tagged-${metadataDirective}`;
      await client.request('POST', `/buckets/copies/object-copy/${key}`, {
        json: { sourceBucket: 'copies', sourceKey: 'src', metadataDirective },
      });
      t.same(
        (await client.request('GET', `/buckets/copies/object-tags/${key}`)).json,
        { tags: [{ key: 't', value: '1' }] },
        `${metadataDirective} copies the tags`,
      );
    }
    response = await client.request('POST', '/buckets/copies/object-copy/dst', {
      json: { sourceBucket: 'copies', sourceKey: 'src', requireAbsent: true },
    });
    t.equal(response.status, 412);
    response = await client.request('POST', '/buckets/copies/object-copy/dst3', {
      json: { sourceBucket: 'copies', sourceKey: 'src', ifMatch: '"nope"' },
    });
    t.equal(response.status, 412);
    t.equal((response.json as Problem).code, 'precondition_failed');
    // If-Match and If-None-Match, as on every write, test the destination.
    const copyTo = (key: string, headers: Record<string, string>): Promise<{ status: number }> =>
      client.request('POST', `/buckets/copies/object-copy/${key}`, {
        json: { sourceBucket: 'copies', sourceKey: 'src' },
        headers,
      });
    t.equal((await copyTo('dst', { 'If-None-Match': '*' })).status, 412, 'If-None-Match: *');
    t.equal((await copyTo('dst', { 'If-Match': '"nope"' })).status, 412, 'If-Match mismatch');
    t.equal((await copyTo('dst4', { 'If-Match': source.etag })).status, 412, 'If-Match, absent');
    t.equal((await copyTo('dst', { 'If-Match': source.etag })).status, 200, 'If-Match match');
    t.equal((await copyTo('dst4', { 'If-None-Match': '*' })).status, 200, 'absent');
    response = await client.request('POST', '/buckets/copies/object-copy/dst3', {
      json: { sourceBucket: 'copies', sourceKey: 'missing' },
    });
    t.equal(response.status, 404);
    response = await client.request('POST', '/buckets/copies/object-copy/dst5', {
      json: { sourceBucket: 'copies', sourceKey: 'src', ifNoneMacth: '*' },
    });
    t.equal(response.status, 400, 'a misspelt field is refused, not ignored');
    t.match(response.json, { code: 'bad_request', message: /unknown field "ifNoneMacth"/ });

    // Source conditions: RFC 9110's precedence, and tags with or without their quotes.
    const copyIf = (conditions: Record<string, string>): Promise<{ status: number }> =>
      client.request('POST', '/buckets/copies/object-copy/dst6', {
        json: { sourceBucket: 'copies', sourceKey: 'src', ...conditions },
      });
    const past = '2020-01-01T00:00:00Z';
    const future = '2099-01-01T00:00:00Z';
    const bare = source.etag.slice(1, -1);
    const conditionCases: Array<[Record<string, string>, number, string]> = [
      [{ ifMatch: source.etag, ifUnmodifiedSince: past }, 200, 'a matching ifMatch decides'],
      [{ ifUnmodifiedSince: past }, 412, 'ifUnmodifiedSince alone'],
      [{ ifNoneMatch: '"other"', ifModifiedSince: future }, 200, 'ifNoneMatch decides'],
      [{ ifModifiedSince: future }, 412, 'ifModifiedSince alone'],
      [{ ifNoneMatch: source.etag, ifModifiedSince: past }, 412, 'a matching ifNoneMatch'],
      [{ ifMatch: bare }, 200, 'an unquoted ifMatch'],
      [{ ifNoneMatch: bare }, 412, 'an unquoted ifNoneMatch'],
      [{ ifModifiedSince: 'Jan 1 2099' }, 400, 'a date that is not RFC 3339'],
      [{ ifUnmodifiedSince: '2020-02-30T00:00:00Z' }, 400, 'an impossible date'],
    ];
    for (const [conditions, status, name] of conditionCases)
      t.equal((await copyIf(conditions)).status, status, name);

    // Metadata given without REPLACE would be ignored: refused instead.
    for (const extra of [{ metadata: { x: 'y' } }, { contentType: 'image/png' }]) {
      response = await client.request('POST', '/buckets/copies/object-copy/dst7', {
        json: { sourceBucket: 'copies', sourceKey: 'src', ...extra },
      });
      t.equal(response.status, 400, `${Object.keys(extra).join()} without REPLACE`);
      t.match(response.json, { message: /metadataDirective REPLACE/ });
    }
    // A copy onto itself must change something, as in S3.
    response = await client.request('POST', '/buckets/copies/object-copy/src', {
      json: { sourceBucket: 'copies', sourceKey: 'src' },
    });
    t.equal(response.status, 400, 'an unchanged copy onto itself');
    response = await client.request('POST', '/buckets/copies/object-copy/src', {
      json: {
        sourceBucket: 'copies',
        sourceKey: 'src',
        metadataDirective: 'REPLACE',
        metadata: { a: '2' },
      },
    });
    t.equal(response.status, 200, 'a copy onto itself that replaces the metadata');
    t.match(response.json, { metadata: { a: '2' }, etag: source.etag });
  });

  await t.test('batch delete reports per key', async (t) => {
    await client.request('POST', '/buckets', { json: { name: 'batch' } });
    for (const key of ['a', 'b', 'c']) await client.put('batch', key, key);
    const response = await client.request('POST', '/buckets/batch/objects:batchDelete', {
      json: { objects: [{ key: 'a' }, { key: 'b' }, { key: 'x'.repeat(1100) }] },
    });
    t.equal(response.status, 200);
    const outcome = response.json as { deleted: Array<{ key: string }>; errors: Problem[] };
    t.same(
      outcome.deleted.map((d) => d.key),
      ['a', 'b'],
    );
    t.equal(outcome.errors.length, 1);
    t.equal(outcome.errors[0]?.code, 'bad_request');
    t.same(
      (
        (await client.request('GET', '/buckets/batch/objects')).json as {
          objects: Array<{ key: string }>;
        }
      ).objects.map((o) => o.key),
      ['c'],
    );
    const tooMany = { objects: Array.from({ length: 1001 }, (_, i) => ({ key: `k${i}` })) };
    t.equal(
      (await client.request('POST', '/buckets/batch/objects:batchDelete', { json: tooMany }))
        .status,
      400,
    );
  });

  await t.test('idempotency keys', async (t) => {
    await client.request('POST', '/buckets', { json: { name: 'idem' } });
    const body = Buffer.from('payload-1');
    let response = await client.put('idem', 'k', body, { 'Idempotency-Key': 'abc' });
    t.equal(response.status, 400, 'needs a checksum header');
    const headers = { 'Idempotency-Key': 'op-1', 'X-Service-Checksum-SHA256': sha256(body) };
    const first = await client.put('idem', 'k', body, headers);
    t.equal(first.status, 200);
    await client.put('idem', 'k', 'overwritten meanwhile');
    const replay = await client.put('idem', 'k', body, headers);
    t.equal(replay.status, 200);
    t.same(replay.json, first.json, 'a replay returns the original result');
    t.equal(
      (await client.get('idem', 'k')).bytes.toString(),
      'overwritten meanwhile',
      'and stores nothing',
    );
    const other = Buffer.from('payload-2');
    response = await client.put('idem', 'k', other, headers);
    t.equal(response.status, 422, 'a replay whose body is not the first body is refused');
    t.equal((response.json as Problem).code, 'idempotency_key_reused');
    t.equal((await client.get('idem', 'k')).bytes.toString(), 'overwritten meanwhile');
    response = await client.put('idem', 'k', body.subarray(0, 4), headers);
    t.equal(response.status, 422, 'so is one of another length (the length is bound too)');

    // Bodies of several blocks, declared with more than one algorithm: the replay is checked
    // with one of them, whole, however it arrives.
    const large = randomBytes(3 * 1024 * 1024 + 17);
    const largeHeaders = {
      'Idempotency-Key': 'op-large',
      'X-Service-Checksum-SHA256': sha256(large),
      'X-Service-Checksum-CRC32C': crc32cBase64(large),
    };
    const firstLarge = await client.put('idem', 'large', large, largeHeaders);
    t.equal(firstLarge.status, 200);
    const changed = Buffer.from(large);
    changed.writeUInt8(changed.readUInt8(changed.length - 1) ^ 1, changed.length - 1);
    response = await client.put('idem', 'large', changed, largeHeaders);
    t.equal(response.status, 422, 'one byte changed at the very end is noticed');
    t.equal((response.json as Problem).code, 'idempotency_key_reused');
    response = await client.put('idem', 'large', large, largeHeaders);
    t.equal(response.status, 200);
    t.same(response.json, firstLarge.json, 'the same body replays');
    t.ok((await client.get('idem', 'large')).bytes.equals(large));
    const emptyHeaders = { 'Idempotency-Key': 'op-empty', 'X-Service-Checksum-SHA256': sha256('') };
    const firstEmpty = await client.put('idem', 'empty', '', emptyHeaders);
    t.equal(firstEmpty.status, 200);
    response = await client.put('idem', 'empty', '', emptyHeaders);
    t.same([response.status, response.json], [200, firstEmpty.json], 'an empty body replays');

    response = await client.put('idem', 'k', other, {
      'Idempotency-Key': 'op-1',
      'X-Service-Checksum-SHA256': sha256(other),
    });
    t.equal(response.status, 422);
    t.equal((response.json as Problem).code, 'idempotency_key_reused');
    response = await client.put('idem', 'k-elsewhere', body, headers);
    t.equal(response.status, 422, 'the same key and body for another object is a reuse');
    t.equal((response.json as Problem).code, 'idempotency_key_reused');
    t.equal((await client.get('idem', 'k-elsewhere')).status, 404, 'and stores nothing');
    response = await client.put('idem', 'k', body, { ...headers, 'Content-Type': 'text/plain' });
    t.equal(response.status, 422, 'the same key and body with another Content-Type is a reuse');
    // Opened first, so that the look right after the answer is not late.
    const index = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: true });
    t.teardown(() => index.close());
    response = await client.put('idem', 'k2', other, {
      'Idempotency-Key': 'op-2',
      'X-Service-Checksum-SHA256': sha256(body),
    });
    // Freed before the failure is answered: a retry at once may go through another listener.
    index.refresh();
    const held = [...index.range(DB.idempotency, {})].filter(({ key }) =>
      Buffer.from(key).includes('op-2'),
    );
    t.equal(response.status, 400, 'a wrong digest fails');
    t.equal((response.json as Problem).code, 'checksum_mismatch');
    t.same(held, [], 'the failed request freed its key before it answered');

    // A client that goes away right after its headers: the request frees its key, so a retry
    // runs (after 409s while the gateway has not yet seen the client go) instead of meeting the
    // key in use until the claim goes stale, 15 minutes later.
    const url = new URL(`${client.baseUrl}/buckets/idem/objects/gone`);
    for (let round = 0; round < 3; round += 1) {
      const key = `op-gone-${round}`;
      await new Promise<void>((resolve) => {
        const socket = connect(Number(url.port), url.hostname, () => {
          socket.write(
            `PUT ${url.pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${client.token}` +
              `\r\nContent-Length: ${body.length}\r\nIdempotency-Key: ${key}\r\n` +
              `X-Service-Checksum-SHA256: ${sha256(body)}\r\n\r\n`,
            () => {
              socket.destroy();
              resolve();
            },
          );
        });
      });
      for (let attempt = 0; attempt < 50; attempt += 1) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        response = await client.put('idem', 'gone', body, {
          'Idempotency-Key': key,
          'X-Service-Checksum-SHA256': sha256(body),
        });
        if (response.status !== 409) break;
      }
      t.equal(response.status, 200, `round ${round}: a retry after the client went away runs`);
    }
    response = await client.put('idem', 'k2', other, {
      'Idempotency-Key': 'op-2',
      'X-Service-Checksum-SHA256': sha256(other),
    });
    t.equal(response.status, 200, 'a failed first attempt frees the key');
  });

  await t.test('conditional writes: exactly one If-None-Match: * writer wins', async (t) => {
    await client.request('POST', '/buckets', { json: { name: 'race' } });
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        client.put('race', 'once', `writer-${i}`, { 'If-None-Match': '*' }),
      ),
    );
    t.equal(results.filter((r) => r.status === 200).length, 1);
    t.equal(results.filter((r) => r.status === 412).length, 15);
    const current = await client.get('race', 'once');
    const etag = current.headers.get('etag') as string;
    t.equal((await client.put('race', 'once', 'next', { 'If-Match': '"other"' })).status, 412);
    t.equal(
      (await client.put('race', 'once', 'next', { 'If-Match': `W/${etag}` })).status,
      412,
      'If-Match compares strongly on writes too',
    );
    t.equal((await client.put('race', 'once', 'next', { 'If-Match': etag })).status, 200);
    t.equal(
      (
        await client.get('race', 'once', {
          'If-None-Match': (await client.get('race', 'once')).headers.get('etag') as string,
        })
      ).status,
      304,
    );
  });

  await t.test('read preconditions (RFC 9110 §13.2.2) and a conditional delete', async (t) => {
    await client.request('POST', '/buckets', { json: { name: 'cond' } });
    const stored = await client.put('cond', 'k', 'conditional');
    const etag = stored.headers.get('etag') ?? (stored.json as { etag: string }).etag;
    const modified = new Date((stored.json as { lastModified: string }).lastModified);
    const before = new Date(modified.getTime() - 60_000).toUTCString();
    const after = new Date(modified.getTime() + 60_000).toUTCString();
    const path = '/buckets/cond/objects/k';
    const status = async (method: string, headers: Record<string, string>): Promise<number> =>
      (await client.request(method, path, { headers })).status;
    for (const method of ['GET', 'HEAD']) {
      t.equal(await status(method, { 'If-Match': etag }), 200, `${method} If-Match: its ETag`);
      t.equal(await status(method, { 'If-Match': '*' }), 200, `${method} If-Match: *`);
      t.equal(await status(method, { 'If-Match': '"other"' }), 412, `${method} If-Match: another`);
      t.equal(await status(method, { 'If-Unmodified-Since': after }), 200, `${method} unmodified`);
      t.equal(await status(method, { 'If-Unmodified-Since': before }), 412, `${method} modified`);
      t.equal(
        await status(method, { 'If-Match': etag, 'If-Unmodified-Since': before }),
        200,
        `${method}: If-Match decides, If-Unmodified-Since is then ignored`,
      );
      t.equal(
        await status(method, { 'If-Match': etag, 'If-None-Match': etag }),
        304,
        `${method}: both pass to If-None-Match`,
      );
    }
    const refused = await client.request('GET', path, { headers: { 'If-Match': '"other"' } });
    t.equal((refused.json as Problem).code, 'precondition_failed', 'a problem object');
    t.equal(await status('GET', { 'If-Match': `W/${etag}` }), 412, 'If-Match compares strongly');
    t.equal(await status('GET', { 'If-None-Match': `W/${etag}` }), 304, 'If-None-Match weakly');
    for (const notADate of ['0', '2024', 'yesterday', '2024-01-01T00:00:00Z']) {
      t.equal(
        await status('GET', { 'If-Unmodified-Since': notADate }),
        200,
        `If-Unmodified-Since: ${notADate} is not an HTTP-date, so it is ignored`,
      );
    }
    const asctime = new Date(modified.getTime() - 60_000)
      .toUTCString()
      .replace(/^(\w{3}), (\d{2}) (\w{3}) (\d{4}) ([\d:]{8}) GMT$/, '$1 $3 $2 $5 $4');
    t.equal(await status('GET', { 'If-Unmodified-Since': asctime }), 412, 'an asctime date');

    let deleted = await client.request('DELETE', path, { headers: { 'If-Match': '"other"' } });
    t.equal(deleted.status, 412, 'DELETE If-Match: another ETag');
    t.equal((deleted.json as Problem).code, 'precondition_failed');
    t.equal((await client.get('cond', 'k')).status, 200, 'and the object is still there');
    deleted = await client.request('DELETE', path, { headers: { 'If-Match': etag } });
    t.equal(deleted.status, 204, 'DELETE If-Match: its ETag');
    t.equal((await client.get('cond', 'k')).status, 404);
    deleted = await client.request('DELETE', path, { headers: { 'If-Match': '*' } });
    t.equal(deleted.status, 412, 'DELETE If-Match: * of an absent object');
    deleted = await client.request('DELETE', `${path}?versionId=00000000000000ff`, {
      headers: { 'If-Match': '"other"' },
    });
    t.equal(deleted.status, 404, 'a version that does not exist is 404, whatever If-Match says');
  });

  await t.test('write preconditions: If-Unmodified-Since and a DELETE If-None-Match', async (t) => {
    t.equal((await client.request('POST', '/buckets', { json: { name: 'wcond' } })).status, 201);
    const stored = await client.put('wcond', 'k', 'first');
    const modified = new Date((stored.json as { lastModified: string }).lastModified);
    const before = new Date(modified.getTime() - 60_000).toUTCString();
    const after = new Date(modified.getTime() + 60_000).toUTCString();
    const put = (headers: Record<string, string>): Promise<{ status: number; json: unknown }> =>
      client.put('wcond', 'k', 'second', headers);
    const answer = await put({ 'If-Unmodified-Since': before });
    t.equal(answer.status, 412, 'PUT: modified since the date');
    t.equal((answer.json as Problem).code, 'precondition_failed');
    t.equal((await client.get('wcond', 'k')).bytes.toString(), 'first', 'nothing written');
    t.equal(
      (
        await put({
          'If-Match': (stored.json as { etag: string }).etag,
          'If-Unmodified-Since': before,
        })
      ).status,
      200,
      'If-Match decides, If-Unmodified-Since is then ignored',
    );
    t.equal((await put({ 'If-Unmodified-Since': 'yesterday' })).status, 200, 'not a date: ignored');
    t.equal(
      (await client.put('wcond', 'fresh', 'x', { 'If-Unmodified-Since': before })).status,
      200,
      'an absent object has no date to test',
    );

    const path = '/buckets/wcond/objects/k';
    const del = (headers: Record<string, string>): Promise<{ status: number }> =>
      client.request('DELETE', path, { headers });
    t.equal((await del({ 'If-None-Match': '*' })).status, 412, 'DELETE If-None-Match: * exists');
    t.equal((await del({ 'If-Unmodified-Since': before })).status, 412, 'DELETE: modified since');
    t.equal((await client.get('wcond', 'k')).status, 200, 'and the object is still there');
    t.equal((await del({ 'If-None-Match': '"other"', 'If-Unmodified-Since': after })).status, 204);
    t.equal((await client.get('wcond', 'k')).status, 404);
  });

  await t.test('a revoke or a tenant disable stops uploads already running (401)', async (t) => {
    const owner = service.adminToken();
    const port = Number(new URL(service.publicUrl).port);
    /** Starts a PUT, sends half its body, runs `meanwhile`, then the rest; the answer's status. */
    const interrupted = async (
      writer: DataClient,
      bucket: string,
      meanwhile: () => Promise<void>,
    ): Promise<number> => {
      const body = randomBytes(256 * 1024);
      let answered: (status: number) => void = () => undefined;
      const status = new Promise<number>((resolve) => (answered = resolve));
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'PUT',
          path: `/api/v1/buckets/${bucket}/objects/late`,
          agent: false,
          headers: {
            Authorization: `Bearer ${writer.token}`,
            'Content-Length': String(body.length),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => answered(res.statusCode ?? 0));
        },
      );
      req.on('error', () => answered(0));
      req.write(body.subarray(0, body.length / 2));
      await new Promise((resolve) => setTimeout(resolve, 200));
      await meanwhile();
      req.end(body.subarray(body.length / 2));
      return status;
    };

    const revoked = await service.tenant('revokes', 'read,write', owner);
    t.equal((await revoked.request('POST', '/buckets', { json: { name: 'late' } })).status, 201);
    const revokeStatus = await interrupted(revoked, 'late', async () => {
      const path = `/tenants/revokes/keys/${revoked.accessKeyId}/revoke`;
      t.equal((await service.admin('POST', path, owner, { reason: 'test' })).status, 200);
    });
    t.equal(revokeStatus, 401, 'the key was revoked while its upload ran');
    const reader = await service.tenant('revokes', 'read', owner);
    t.equal((await reader.get('late', 'late')).status, 404, 'and nothing was committed');

    const disabled = await service.tenant('disables', 'read,write', owner);
    t.equal((await disabled.request('POST', '/buckets', { json: { name: 'later' } })).status, 201);
    const disableStatus = await interrupted(disabled, 'later', async () => {
      const answer = await service.admin('POST', '/tenants/disables/disable', owner, {
        reason: 'test',
      });
      t.equal(answer.status, 200);
    });
    t.equal(disableStatus, 401, 'the tenant was disabled while its upload ran');
  });

  await t.test(
    'delete markers named by versionId: 405 for tags, 400 as a copy source',
    async (t) => {
      const created = await client.request('POST', '/buckets', {
        json: { name: 'dmark', versioning: 'Enabled' },
      });
      t.equal(created.status, 201);
      await client.put('dmark', 'k', 'v1');
      const marker = await client.request('DELETE', '/buckets/dmark/objects/k');
      const markerId = marker.headers.get('x-service-version-id') ?? '';
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const answer = await client.request(
          method,
          `/buckets/dmark/object-tags/k?versionId=${markerId}`,
          {
            ...(method === 'PUT' ? { json: { tags: [] } } : {}),
          },
        );
        t.equal(answer.status, 405, `${method} tags of a delete marker`);
        t.equal((answer.json as Problem).code, 'method_not_allowed');
        t.equal(answer.headers.get('allow'), '', 'a marker allows none of them');
      }
      // Retention and legal hold exist only in an object-lock bucket (400 elsewhere).
      t.equal(
        (await client.request('POST', '/buckets', { json: { name: 'dmlock', objectLock: true } }))
          .status,
        201,
      );
      await client.put('dmlock', 'k', 'v1');
      const lockedMarker =
        (await client.request('DELETE', '/buckets/dmlock/objects/k')).headers.get(
          'x-service-version-id',
        ) ?? '';
      for (const subresource of ['object-retention', 'object-legal-hold']) {
        const answer = await client.request(
          'GET',
          `/buckets/dmlock/${subresource}/k?versionId=${lockedMarker}`,
        );
        t.equal(answer.status, 405, `GET ${subresource} of a delete marker`);
        t.equal(answer.headers.get('x-service-delete-marker'), 'true');
      }
      const copied = await client.request('POST', '/buckets/dmark/object-copy/c', {
        json: { sourceBucket: 'dmark', sourceKey: 'k', sourceVersionId: markerId },
      });
      t.equal(copied.status, 400, 'a delete marker is no copy source');
      t.match((copied.json as Problem).message, /delete marker/);
    },
  );

  await t.test(
    'checksums: every algorithm verified, malformed and unsupported refused',
    async (t) => {
      await client.request('POST', '/buckets', { json: { name: 'sums' } });
      const body = Buffer.from('123456789');
      const response = await client.put('sums', 'k', body, {
        'X-Service-Checksum-CRC32': Buffer.from('cbf43926', 'hex').toString('base64'),
        'X-Service-Checksum-CRC32C': Buffer.from('e3069283', 'hex').toString('base64'),
        'X-Service-Checksum-CRC64NVME': Buffer.from('ae8b14860a799888', 'hex').toString('base64'),
        'X-Service-Checksum-SHA1': createHash('sha1').update(body).digest('base64'),
        'X-Service-Checksum-SHA256': sha256(body),
      });
      t.equal(response.status, 200, JSON.stringify(response.json));
      const head = await client.request('HEAD', '/buckets/sums/objects/k');
      t.equal(
        head.headers.get('x-service-checksum-crc64nvme'),
        Buffer.from('ae8b14860a799888', 'hex').toString('base64'),
      );
      t.equal(
        (
          (await client.put('sums', 'bad', body, { 'X-Service-Checksum-CRC32C': 'AAAAAA==' }))
            .json as Problem
        ).code,
        'checksum_mismatch',
      );
      t.equal(
        (await client.put('sums', 'bad', body, { 'X-Service-Checksum-CRC32C': 'not base64!' }))
          .status,
        400,
      );
      t.equal(
        (await client.put('sums', 'bad', body, { 'X-Service-Checksum-MD5': 'AAAAAA==' })).status,
        400,
      );
      t.equal((await client.get('sums', 'bad')).status, 404, 'nothing was committed');
    },
  );

  await t.test('scopes: a read-only key cannot write', async (t) => {
    const reader: DataClient = await service.tenant('acme', 'read');
    t.equal((await reader.put('sums', 'nope', 'x')).status, 403);
    t.equal((await reader.get('sums', 'k')).status, 200);
    const scoped = await service.tenant(
      'acme',
      'op=write:bucket=sums:prefix=in/,op=read:bucket=sums:prefix=in/',
    );
    t.equal((await scoped.put('sums', 'in/a', 'x')).status, 200);
    t.equal((await scoped.put('sums', 'out/a', 'x')).status, 403);
    t.equal((await scoped.get('sums', 'k')).status, 403);
    // It lists the buckets it may read in (a prefix is enough), not the tenant's others.
    const listed = await scoped.request('GET', '/buckets');
    t.equal(listed.status, 200);
    t.same(
      (listed.json as { buckets: Array<{ name: string }> }).buckets.map((bucket) => bucket.name),
      ['sums'],
      'only the bucket its scope reads in',
    );
    const writeOnly = await service.tenant('acme', 'op=write:bucket=sums');
    t.equal((await writeOnly.request('GET', '/buckets')).status, 403, 'a key that reads nowhere');
  });

  await t.test('explicit-deny bucket policies override scopes', async (t) => {
    await client.request('POST', '/buckets', { json: { name: 'guarded' } });
    await client.put('guarded', 'public/a', 'a');
    await client.put('guarded', 'secret/b', 'b');
    const engine = new EngineClient(join(service.dataDir, 'engine.sock'));
    t.teardown(() => engine.close());
    const policy = {
      version: 1,
      statements: [
        {
          effect: 'Deny',
          actions: ['read', 'delete'],
          principals: [client.accessKeyId],
          prefix: 'secret/',
        },
      ],
    };
    await engine.call('setBucketPolicy', { tenantId: 'acme', bucket: 'guarded', policy });
    t.equal((await client.get('guarded', 'public/a')).status, 200);
    const denied = await client.get('guarded', 'secret/b');
    t.equal(denied.status, 403);
    t.equal((denied.json as Problem).code, 'forbidden');
    t.equal((await client.request('DELETE', '/buckets/guarded/objects/secret/b')).status, 403);
    t.equal(
      (await client.request('GET', '/buckets/guarded/objects?prefix=secret/')).status,
      403,
      'a listing that could reveal denied keys',
    );
    t.equal((await client.request('GET', '/buckets/guarded/objects?prefix=public/')).status, 200);
    t.equal((await client.put('guarded', 'secret/c', 'c')).status, 200, 'write was not denied');
    await t.rejects(
      engine.call('setBucketPolicy', {
        tenantId: 'acme',
        bucket: 'guarded',
        policy: {
          version: 1,
          statements: [{ effect: 'Allow', actions: ['read'], principals: ['*'] }],
        },
      }),
      { code: 'bad_request' },
    );
    await engine.call('setBucketPolicy', { tenantId: 'acme', bucket: 'guarded', policy: null });
    t.equal((await client.get('guarded', 'secret/b')).status, 200, 'cleared');
  });
});
