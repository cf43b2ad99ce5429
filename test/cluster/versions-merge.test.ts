// Goal: the merge of replicas' versions pages (src/cluster/versions-listing.ts `mergePages`)
// keeps one entry per version, the newest null version, listing order, `maxKeys` items, the
// truncation any replica saw, the latest version of each key (also when the page resumed inside
// a key), and drops the entries a replica deleted.
// Method: pages built by hand, as replicas answer them; no cluster.
import t from 'tap';
import type { ObjectVersionRecord } from '../../src/engine/index/schema.js';
import { mergePages, type ReplicaPage } from '../../src/cluster/versions-listing.js';

function entry(key: string, seq: number, versionId = seq.toString(16).padStart(16, '0')) {
  return { entry: { key, seq, versionId } as ObjectVersionRecord };
}

function page(items: ReplicaPage['items'], truncated = false, markerNewest = 0): ReplicaPage {
  return { items, truncated, markerNewest };
}

const base = { tenantId: 'acme', bucket: 'b', prefix: '' };
const ids = (merged: ReturnType<typeof mergePages>) =>
  merged.entries.map((e) => `${e.key}@${e.seq}${e.isLatest ? '*' : ''}`);

t.test('union in listing order, one entry per version', async (t) => {
  const full = page([entry('a', 9), entry('a', 5), entry('c', 7)]);
  const stale = page([entry('a', 5), entry('b', 3), entry('c', 7)]);
  const merged = mergePages([full, stale], { ...base, maxKeys: 10 });
  t.same(ids(merged), ['a@9*', 'a@5', 'b@3*', 'c@7*']);
  t.equal(merged.isTruncated, false);
  t.equal(merged.nextKeyMarker, undefined);
});

t.test('the newest null version wins; deleted entries are dropped', async (t) => {
  const fresh = page([entry('k', 20, 'null'), entry('m', 4)]);
  const stale = page([entry('k', 10, 'null'), entry('m', 4), entry('z', 2)]);
  const merged = mergePages(
    [fresh, stale],
    { ...base, maxKeys: 10 },
    new Set([`${'0'.repeat(15)}2/z`]),
  );
  t.same(ids(merged), ['k@20*', 'm@4*']);
});

t.test('maxKeys items, and the markers of the last', async (t) => {
  const one = page([entry('a', 3), entry('b', 2)], true);
  const two = page([entry('a', 3), entry('a', 1)]);
  const merged = mergePages([one, two], { ...base, maxKeys: 2 });
  t.same(ids(merged), ['a@3*', 'a@1']);
  t.equal(merged.isTruncated, true);
  t.equal(merged.nextKeyMarker, 'a');
  t.equal(merged.nextVersionIdMarker, '0000000000000001');
  const short = mergePages([page([entry('a', 3)], true), page([entry('a', 3)])], {
    ...base,
    maxKeys: 5,
  });
  t.equal(short.isTruncated, true, 'a replica that had more makes the page truncated');
});

t.test('common prefixes once, in order with the keys', async (t) => {
  const query = { ...base, delimiter: '/', maxKeys: 3 };
  const merged = mergePages(
    [page([{ prefix: 'd/' }, entry('e', 1)]), page([entry('c', 2), { prefix: 'd/' }])],
    query,
  );
  t.same(merged.commonPrefixes, ['d/']);
  t.same(ids(merged), ['c@2*', 'e@1*']);
  const cut = mergePages([page([entry('c', 2), { prefix: 'd/' }, entry('e', 1)])], {
    ...query,
    maxKeys: 2,
  });
  t.equal(cut.nextKeyMarker, 'd/', 'a page that ends on a prefix resumes past it');
  t.equal(cut.nextVersionIdMarker, undefined);
});

t.test('a page resumed inside a key marks only its newest version latest', async (t) => {
  const query = { ...base, keyMarker: 'a', versionIdMarker: '0000000000000009', maxKeys: 10 };
  const behind = page([entry('a', 5), entry('b', 1)], false, 5);
  const ahead = page([entry('b', 1)], false, 9);
  t.same(ids(mergePages([behind, ahead], query)), ['a@5', 'b@1*']);
  t.same(ids(mergePages([behind], query)), ['a@5*', 'b@1*'], 'newest where no one has newer');
});
