// Goal: multipart listings on a node that was down show the whole cluster's uploads, merged from
// a majority of the bucket's replicas (docs/cluster.md §8a, "Listings"): ListMultipartUploads
// shows the uploads created meanwhile and not one aborted meanwhile, in pages that continue with
// their markers; ListParts lists the parts of an upload the node never heard of and the parts it
// missed of one it knew, page by page, and answers NoSuchUpload for an upload aborted meanwhile.
// Method: the cluster kit, three nodes on real etcd (replication factor 3). Two uploads created
// through n1 with a part each, and one more with none; n3 SIGKILLed; one of the first aborted
// through n2, a part added to the other, and two uploads created with parts through n1 and n2;
// n3 started again, and n3's S3 API (and its native API for the uploads) asked. Skips, with the
// reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  HeadBucketCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { clusterEnvironment, waitFor } from './kit.js';
import { Client, threeNodesWithS3 } from './data-client.js';
import { s3ErrorOf } from '../helpers/s3-sdk.js';

const env = await clusterEnvironment();
const Bucket = 'uploads';

t.test('multipart listings are merged across replicas', { skip: env.skip ?? false }, async (t) => {
  const cluster = await threeNodesWithS3((fn) => t.teardown(fn));
  const n3 = cluster.nodes[2];
  const [keyId, secret] = cluster.key;
  const [s1, s2, s3] = cluster.s3;
  await waitFor('the key on n1', () =>
    s1.send(new CreateBucketCommand({ Bucket })).then(() => true),
  );
  for (const s of [s2, s3])
    await waitFor('the bucket on every node', () =>
      s.send(new HeadBucketCommand({ Bucket })).then(() => true),
    );
  const create = async (s: S3Client, Key: string) => {
    const created = await s.send(new CreateMultipartUploadCommand({ Bucket, Key }));
    return { Bucket, Key, UploadId: created.UploadId ?? '' };
  };
  const part = (s: S3Client, upload: { Key: string; UploadId: string }, PartNumber: number) =>
    s.send(new UploadPartCommand({ Bucket, ...upload, PartNumber, Body: randomBytes(1000) }));

  const aborted = await create(s1, 'a');
  await part(s1, aborted, 1);
  const known = await create(s1, 'c');
  await part(s1, known, 1);
  const quiet = await create(s1, 'a2');
  await waitFor('n3 holding the three uploads', async () => {
    const answer = await s3.send(new ListMultipartUploadsCommand({ Bucket }));
    return (answer.Uploads ?? []).length === 3 ? true : undefined;
  });

  await n3.kill9();
  await s2.send(new AbortMultipartUploadCommand(aborted));
  await part(s2, known, 2);
  const missed = await create(s1, 'b');
  await part(s1, missed, 1);
  await part(s2, missed, 2);
  const later = await create(s2, 'd');
  await n3.start();

  const expected = [quiet, missed, known, later].map(
    (upload) => `${upload.Key}/${upload.UploadId}`,
  );
  const listed: string[] = [];
  let keyMarker: string | undefined;
  let uploadIdMarker: string | undefined;
  for (let page = 0; page < 10; page += 1) {
    const answer = await s3.send(
      new ListMultipartUploadsCommand({
        Bucket,
        MaxUploads: 2,
        KeyMarker: keyMarker,
        UploadIdMarker: uploadIdMarker,
      }),
    );
    listed.push(
      ...(answer.Uploads ?? []).map((upload) => `${upload.Key ?? ''}/${upload.UploadId ?? ''}`),
    );
    if (answer.IsTruncated !== true) break;
    keyMarker = answer.NextKeyMarker;
    uploadIdMarker = answer.NextUploadIdMarker;
  }
  t.same(listed, expected, 'n3 lists the uploads in progress in pages of 2');

  const first = await s3.send(new ListPartsCommand({ ...missed, MaxParts: 1 }));
  t.same(
    (first.Parts ?? []).map((p) => p.PartNumber),
    [1],
    'n3 lists the first part of an upload created while it was down',
  );
  t.equal(first.IsTruncated, true);
  const second = await s3.send(
    new ListPartsCommand({ ...missed, MaxParts: 1, PartNumberMarker: first.NextPartNumberMarker }),
  );
  t.same(
    (second.Parts ?? []).map((p) => p.PartNumber),
    [2],
    'and its second on the next page',
  );
  t.equal(second.IsTruncated, false);
  const both = await s3.send(new ListPartsCommand(known));
  t.same(
    (both.Parts ?? []).map((p) => p.PartNumber),
    [1, 2],
    'the part it missed is listed',
  );
  const gone = await s3ErrorOf(s3.send(new ListPartsCommand(aborted)));
  t.equal(gone.name, 'NoSuchUpload', 'an upload aborted while it was down is gone');

  const native = new Client(n3, keyId, secret);
  await native.login();
  const answer = await native.send('GET', `/buckets/${Bucket}/multipart`);
  t.equal(answer.status, 200, answer.bytes.toString());
  const uploads = (
    JSON.parse(answer.bytes.toString()) as { uploads: Array<{ key: string; uploadId: string }> }
  ).uploads;
  t.same(
    uploads.map((upload) => `${upload.key}/${upload.uploadId}`),
    expected,
    "n3's native uploads listing shows the same",
  );
});
