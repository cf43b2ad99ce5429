// Goal: a versions listing (S3's ListObjectVersions, the native versions listing) on a node that
// was down shows the whole cluster's versions, merged from a majority of the bucket's replicas
// (docs/cluster.md §8a, "Listings"): the versions written while it was down, not only each key's
// current one, without a version deleted by its id meanwhile; pages of any size continue with
// their markers, on that node or another, and a delimiter rolls keys up the same way.
// Method: the cluster kit, three nodes on real etcd (replication factor 3). A versioned bucket;
// two versions written, n3 SIGKILLed, then versions, a delete marker and a delete by version id
// written through n1 and n2; n3 started again. n3's listing in pages of 2 (each page's markers
// given to the next, alternately on n3 and n2) must equal what the writes' answers say the bucket
// holds, with the newest version of each key marked latest. Skips, with the reason, where etcd
// cannot be had.
import t from 'tap';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  HeadBucketCommand,
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { clusterEnvironment, waitFor } from './kit.js';
import { Client, threeNodesWithS3 } from './data-client.js';

const env = await clusterEnvironment();
const Bucket = 'hist';

interface Listed {
  key: string;
  versionId: string;
  latest: boolean;
  marker: boolean;
}

/** Every version and delete marker, in pages of `pageSize`, each page on the next client. */
async function listAll(clients: S3Client[], pageSize: number, delimiter?: string) {
  const listed: Listed[] = [];
  const prefixes: string[] = [];
  let keyMarker: string | undefined;
  let versionIdMarker: string | undefined;
  for (let page = 0; ; page += 1) {
    const s3 = clients[page % clients.length] as S3Client;
    const answer = await s3.send(
      new ListObjectVersionsCommand({
        Bucket,
        MaxKeys: pageSize,
        KeyMarker: keyMarker,
        VersionIdMarker: versionIdMarker,
        Delimiter: delimiter,
      }),
    );
    const versions = (answer.Versions ?? []).map((v) => ({ ...v, marker: false }));
    const markers = (answer.DeleteMarkers ?? []).map((v) => ({ ...v, marker: true }));
    const entries = [...versions, ...markers].map((v) => ({
      key: v.Key ?? '',
      versionId: v.VersionId ?? '',
      latest: v.IsLatest === true,
      marker: v.marker,
    }));
    // Listing order: by key, then newest first (version ids grow with time).
    entries.sort((a, b) =>
      a.key === b.key ? b.versionId.localeCompare(a.versionId) : a.key < b.key ? -1 : 1,
    );
    listed.push(...entries);
    prefixes.push(...(answer.CommonPrefixes ?? []).map((p) => p.Prefix ?? ''));
    if (answer.IsTruncated !== true) return { listed, prefixes };
    keyMarker = answer.NextKeyMarker;
    versionIdMarker = answer.NextVersionIdMarker;
    if (page > 100) throw new Error('the listing does not end');
  }
}

t.test('versions listings are merged across replicas', { skip: env.skip ?? false }, async (t) => {
  const cluster = await threeNodesWithS3((fn) => t.teardown(fn));
  const n3 = cluster.nodes[2];
  const [keyId, secret] = cluster.key;
  const [s1, s2, s3] = cluster.s3;
  await waitFor('the key on n1', () =>
    s1.send(new CreateBucketCommand({ Bucket })).then(() => true),
  );
  await s1.send(
    new PutBucketVersioningCommand({ Bucket, VersioningConfiguration: { Status: 'Enabled' } }),
  );
  for (const s of [s2, s3])
    await waitFor('the bucket versioned on every node', () =>
      s
        .send(new HeadBucketCommand({ Bucket }))
        .then(() => s.send(new ListObjectVersionsCommand({ Bucket })))
        .then(() => true),
    );

  /** What the bucket holds, by key: its version ids oldest first (a delete marker with `!`). */
  const held = new Map<string, string[]>();
  const put = async (s: S3Client, key: string): Promise<string> => {
    const answer = await s.send(new PutObjectCommand({ Bucket, Key: key, Body: key }));
    const id = answer.VersionId ?? '';
    held.set(key, [...(held.get(key) ?? []), id]);
    return id;
  };
  const aFirst = await put(s1, 'a');
  await put(s1, 'b');
  await waitFor('n3 holding both versions', async () => {
    const answer = await s3.send(new ListObjectVersionsCommand({ Bucket }));
    return (answer.Versions ?? []).length === 2 ? true : undefined;
  });

  await n3.kill9();
  await put(s1, 'a');
  await put(s2, 'f');
  await put(s1, 'f');
  await put(s2, 'f');
  await put(s1, 'd/x');
  await put(s2, 'd/y');
  const removed = await s2.send(new DeleteObjectCommand({ Bucket, Key: 'b' }));
  held.set('b', [...(held.get('b') ?? []), `!${removed.VersionId ?? ''}`]);
  await s1.send(new DeleteObjectCommand({ Bucket, Key: 'a', VersionId: aFirst }));
  held.set(
    'a',
    (held.get('a') ?? []).filter((id) => id !== aFirst),
  );
  await n3.start();

  const expected: Listed[] = [...held.keys()].sort().flatMap((key) =>
    [...(held.get(key) ?? [])].reverse().map((id, index) => ({
      key,
      versionId: id.replace('!', ''),
      latest: index === 0,
      marker: id.startsWith('!'),
    })),
  );
  const onN3 = await listAll([s3], 2);
  t.same(onN3.listed, expected, 'n3 lists every version in pages of 2');
  const across = await listAll([s3, s2], 3);
  t.same(across.listed, expected, "pages of 3 go on across nodes with each other's markers");
  const whole = await listAll([s3], 1000);
  t.same(whole.listed, expected, 'one page holds the same');

  const rolled = await listAll([s3], 2, '/');
  t.same(rolled.prefixes, ['d/'], 'keys under d/ roll up into one common prefix');
  t.same(
    rolled.listed,
    expected.filter((entry) => !entry.key.startsWith('d/')),
    'and the rest are listed',
  );

  // The native versions listing on n3 takes the same merged pages.
  const native = new Client(n3, keyId, secret);
  await native.login();
  const answer = await native.send('GET', `/buckets/${Bucket}/versions?maxKeys=1000`);
  t.equal(answer.status, 200, answer.bytes.toString());
  const versions = (
    JSON.parse(answer.bytes.toString()) as { versions: Array<{ versionId: string }> }
  ).versions;
  t.same(
    versions.map((version) => version.versionId),
    expected.map((entry) => entry.versionId),
    'the native listing on n3 shows them all',
  );
});
