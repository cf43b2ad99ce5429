// Goal: the service's one authorization resolver checks scope and bucket policy together, in the
// order every transport answers (scope 403, then missing bucket 404, then policy 403), and lists
// only the buckets a key may read in; a read resolves to the version S3 would (a delete marker
// named by its id is a 405 that allows DELETE, a key whose latest version is a delete marker a
// 404 that names the marker), its preconditions answer 412 or 304 as RFC 9110 orders them, and
// an If-Range that does not match serves the whole object; whether a key has a current entry
// (what S3 asks of an If-Match write that failed).
// Method: a real LMDB environment in a temp directory with buckets and versions written
// directly; the service's functions called without any transport.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  objectKey,
  tenantChildKey,
  versionKey,
  type BucketRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../../src/engine/index/schema.js';
import { versionIdOf } from '../../src/engine/ops/objects.js';
import { Access } from '../../src/service/access.js';
import {
  checkReadConditions,
  hasCurrentEntry,
  rangeToServe,
  resolveForRead,
} from '../../src/service/read.js';
import type { Principal } from '../../src/service/auth.js';
import { parseScopes } from '../../src/security/scopes.js';
import { errorAnswer } from '../../src/http/error-answer.js';

const dir = mkdtempSync(join(tmpdir(), 'lw-service-'));
const store = IndexStore.open({ path: dir, readOnly: false });
t.teardown(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const tenant = { id: 't1', num: 1, state: 'active', createdAt: 0 } as unknown as TenantRecord;
const principal = (scopes: string, accessKeyId = 'AK1'): Principal => ({
  accessKeyId,
  tenant,
  scope: parseScopes(scopes),
});

function bucket(id: number, name: string, extra: Partial<BucketRecord> = {}): BucketRecord {
  return {
    id,
    tenantId: 't1',
    name,
    createdAt: 0,
    versioning: 'Enabled',
    objectLock: false,
    ...extra,
  };
}

function version(key: string, seq: number, extra: Partial<ObjectVersionRecord> = {}) {
  const record: ObjectVersionRecord = {
    key,
    versionId: versionIdOf(seq),
    seq,
    lastModified: Date.parse('2026-01-01T00:00:10Z'),
    size: 100,
    etag: '"abc"',
    contentType: 'x',
    metadata: {},
    checksums: {},
    chunks: Buffer.alloc(0),
    storedBytes: 0,
    compressed: false,
    ...extra,
  };
  return record;
}

const open = bucket(1, 'open');
const guarded = bucket(2, 'guarded', {
  policy: {
    version: 1,
    statements: [{ effect: 'Deny', actions: ['read'], principals: ['AK2'], prefix: 'secret/' }],
  },
});
store.transactSync(() => {
  for (const b of [open, guarded]) store.put(DB.buckets, tenantChildKey('t1', b.name), b);
});
const access = new Access(store);

t.test('scope, then existence, then policy: one resolver', async (t) => {
  t.equal(access.bucket(principal('read'), 'open', { verb: 'read', key: 'k' }).id, 1);
  const refused = (fn: () => unknown): string => {
    try {
      fn();
    } catch (error) {
      return `${errorAnswer(error).status}`;
    }
    return 'allowed';
  };
  t.equal(
    refused(() => access.bucket(principal('write'), 'nope', { verb: 'read' })),
    '403',
  );
  t.equal(
    refused(() => access.bucket(principal('read'), 'nope', { verb: 'read' })),
    '404',
  );
  const ak2 = principal('read', 'AK2');
  t.equal(
    refused(() => access.bucket(ak2, 'guarded', { verb: 'read', key: 'secret/x' })),
    '403',
  );
  t.equal(
    refused(() => access.bucket(ak2, 'guarded', { verb: 'read', key: 'public/x' })),
    'allowed',
  );
  t.equal(
    refused(() => access.bucket(ak2, 'guarded', { verb: 'read', listPrefix: 'secret/' })),
    '403',
    'a listing of a denied prefix',
  );
  t.equal(
    refused(() => access.bucket(principal('read'), 'guarded', { verb: 'read', key: 'secret/x' })),
    'allowed',
  );
  t.equal(
    refused(() => access.existing(principal('write'), 'open')),
    'allowed',
  );
  t.equal(
    refused(() => access.tenant(principal('read'), 'write', 'new')),
    '403',
  );
});

t.test('the bucket list holds the buckets a key reads in', async (t) => {
  t.same(
    [...access.readableBuckets(principal('read'))].map((b) => b.name),
    ['guarded', 'open'],
  );
  t.same(
    [...access.readableBuckets(principal('op=read:bucket=open'))].map((b) => b.name),
    ['open'],
  );
  t.throws(() => [...access.readableBuckets(principal('write'))], { code: 'forbidden' });
});

t.test('a read resolves the version S3 would', async (t) => {
  const current = version('a', 3);
  const older = version('a', 2, { etag: '"old"' });
  const marker = version('gone', 5, { deleteMarker: true });
  store.transactSync(() => {
    store.put(DB.objects, objectKey(1, 'a'), current);
    store.put(DB.versions, versionKey(1, 'a', 3), current);
    store.put(DB.versions, versionKey(1, 'a', 2), older);
    store.put(DB.versions, versionKey(1, 'gone', 5), marker);
    store.put(DB.versions, versionKey(1, 'gone', 4), version('gone', 4));
  });
  t.equal(resolveForRead(store, open, 'a', null).etag, '"abc"');
  t.equal(resolveForRead(store, open, 'a', versionIdOf(2)).etag, '"old"');
  const named = errorAnswer(catching(() => resolveForRead(store, open, 'gone', versionIdOf(5))));
  t.same(
    [named.status, named.headers['Allow'], named.headers['X-Service-Version-Id']],
    [405, 'DELETE', versionIdOf(5)],
  );
  const latest = errorAnswer(catching(() => resolveForRead(store, open, 'gone', null)));
  t.same([latest.status, latest.headers['X-Service-Delete-Marker']], [404, 'true']);
  const none = errorAnswer(catching(() => resolveForRead(store, open, 'never', null)));
  t.same([none.status, none.headers], [404, {}]);
  t.ok(hasCurrentEntry(store, open, 'a'), 'a current version is an entry');
  t.notOk(hasCurrentEntry(store, open, 'never'), 'a key never written has none');
  t.notOk(
    hasCurrentEntry(store, { ...open, id: 2 }, 'a'),
    "another bucket's key is not this one's",
  );
});

t.test('read preconditions and If-Range', async (t) => {
  const v = version('a', 3);
  const after = 'Thu, 01 Jan 2026 00:00:11 GMT';
  const before = 'Thu, 01 Jan 2026 00:00:09 GMT';
  t.equal(checkReadConditions({}, v), undefined);
  t.equal(checkReadConditions({ ifMatch: '"abc"' }, v), undefined);
  t.throws(() => checkReadConditions({ ifMatch: 'W/"abc"' }, v), { code: 'precondition_failed' });
  t.throws(() => checkReadConditions({ ifUnmodifiedSince: before }, v), {
    code: 'precondition_failed',
  });
  t.equal(
    checkReadConditions({ ifMatch: '"abc"', ifUnmodifiedSince: before }, v),
    undefined,
    'If-Match wins over If-Unmodified-Since',
  );
  t.equal(checkReadConditions({ ifNoneMatch: 'W/"abc"' }, v), 304, 'weak comparison');
  t.equal(checkReadConditions({ ifModifiedSince: after }, v), 304);
  t.equal(checkReadConditions({ ifNoneMatch: '"x"', ifModifiedSince: after }, v), undefined);
  t.equal(checkReadConditions({ ifModifiedSince: '2026' }, v), undefined, 'not an HTTP-date');
  t.same(rangeToServe({ range: 'bytes=0-9' }, v), { start: 0, end: 9 });
  t.equal(rangeToServe({ range: 'bytes=0-9', ifRange: '"other"' }, v), undefined);
  t.same(rangeToServe({ range: 'bytes=0-9', ifRange: '"abc"' }, v), { start: 0, end: 9 });
  t.same(rangeToServe({ range: 'bytes=-10', ifRange: 'Thu, 01 Jan 2026 00:00:10 GMT' }, v), {
    start: 90,
    end: 99,
  });
});

function catching(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new TypeError('expected a throw');
}
