// Goal: the service's attribute rules refuse what every transport must refuse (too many tags,
// over-long or duplicate keys, control characters, a retention date not in the future, a copy
// onto itself that changes nothing), and its listing page rolls keys under a delimiter into
// common prefixes, counts them as entries, and resumes past them.
// Method: the functions called directly; the listing on a real LMDB environment in a temp
// directory.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, objectKey, type BucketRecord } from '../../src/engine/index/schema.js';
import {
  checkCopyChanges,
  checkRetainUntil,
  checkTags,
  TAGS_MAX,
} from '../../src/service/attributes.js';
import { listObjectEntries, parsePageSize } from '../../src/service/list.js';

t.test('tag rules', async (t) => {
  t.same(checkTags([{ key: 'a', value: '' }]), [{ key: 'a', value: '' }]);
  const many = Array.from({ length: TAGS_MAX + 1 }, (_, i) => ({ key: `k${i}`, value: 'v' }));
  t.throws(() => checkTags(many), { code: 'bad_request' }, 'too many');
  t.throws(() => checkTags([{ key: '', value: 'v' }]), { code: 'bad_request' }, 'empty key');
  t.throws(() => checkTags([{ key: 'x'.repeat(129), value: 'v' }]), { code: 'bad_request' });
  t.same(checkTags([{ key: '€'.repeat(128), value: 'v' }]).length, 1, 'code points, not bytes');
  t.throws(() => checkTags([{ key: 'a\u0001', value: 'v' }]), { code: 'bad_request' });
  t.throws(
    () =>
      checkTags([
        { key: 'a', value: '1' },
        { key: 'a', value: '2' },
      ]),
    { code: 'bad_request', message: /duplicate/ },
  );
  t.throws(() => checkTags({}), { code: 'bad_request' }, 'not an array');
});

t.test('retention and copy rules', async (t) => {
  t.doesNotThrow(() => checkRetainUntil(1001, 1000));
  t.throws(() => checkRetainUntil(1000, 1000), { code: 'bad_request' });
  const onto = { bucket: 'b', key: 'k' };
  const same = { bucket: 'b', key: 'k', versionId: undefined, replacesMetadata: false };
  t.throws(() => checkCopyChanges(same, onto), { code: 'bad_request' });
  t.doesNotThrow(() => checkCopyChanges({ ...same, replacesMetadata: true }, onto));
  t.doesNotThrow(() => checkCopyChanges({ ...same, versionId: 'v' }, onto));
  t.doesNotThrow(() => checkCopyChanges({ ...same, key: 'other' }, onto));
});

t.test('page sizes', async (t) => {
  t.equal(parsePageSize(null, 'maxKeys', 1000), 1000);
  t.equal(parsePageSize('7', 'maxKeys', 1000), 7);
  for (const bad of ['0', '1001', '-1', '1.5', ''])
    t.throws(() => parsePageSize(bad, 'maxKeys', 1000), { code: 'bad_request' }, bad);
});

t.test('a listing page with a delimiter', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-service-list-'));
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const bucket: BucketRecord = {
    id: 9,
    tenantId: 't',
    name: 'b',
    createdAt: 0,
    versioning: 'Unversioned',
    objectLock: false,
  };
  store.transactSync(() => {
    for (const key of ['a/1', 'a/2', 'b', 'c/1', 'd']) {
      const record = { key, versionId: 'null', seq: 1, lastModified: 0, size: 0 };
      store.put(DB.objects, objectKey(9, key), record);
    }
  });
  const names = (entries: ReturnType<typeof listObjectEntries>['entries']): string[] =>
    entries.map((entry) => (entry.kind === 'object' ? entry.version.key : `${entry.prefix}*`));
  const first = listObjectEntries(store, bucket, { prefix: '', delimiter: '/', maxKeys: 2 });
  t.same(names(first.entries), ['a/*', 'b']);
  t.same(first.outcome, { truncated: true, last: { kind: 'key', value: 'b' } });
  const second = listObjectEntries(store, bucket, {
    prefix: '',
    delimiter: '/',
    maxKeys: 1,
    after: first.outcome.last,
  });
  t.same(names(second.entries), ['c/*']);
  t.same(second.outcome.last, { kind: 'prefix', value: 'c/' });
  const third = listObjectEntries(store, bucket, {
    prefix: '',
    delimiter: '/',
    maxKeys: 5,
    after: second.outcome.last,
  });
  t.same(names(third.entries), ['d']);
  t.same(third.outcome, { truncated: false, last: undefined });
});
