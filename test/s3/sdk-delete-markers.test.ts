// Goal: reads that meet a delete marker answer as S3 does: GetObject and HeadObject of a key whose
// latest version is a delete marker are 404 `NoSuchKey` with `x-amz-delete-marker: true` and the
// marker's `x-amz-version-id`; naming the marker by its version id is 405 `MethodNotAllowed` with
// the same two headers and `Allow: DELETE`; an older version still reads. Deletes are idempotent:
// deleting a version that is gone (twice, or concurrently) is 204 naming it, one by one and in
// a DeleteObjects batch, as AWS answers.
// Method: a real `lightwell serve`, a tenant made through the admin API, @aws-sdk/client-s3; the
// refusals' headers read from the SDK's raw response.
import t from 'tap';
import {
  CreateBucketCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { s3ClientFor } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

interface Refusal {
  status: number;
  name: string;
  headers: Record<string, string>;
}

/** The refusal `run` ends with, and its response headers. */
async function refusalOf(run: Promise<unknown>): Promise<Refusal> {
  try {
    await run;
  } catch (error) {
    if (error instanceof S3ServiceException) {
      const raw = error.$response as { headers?: Record<string, string> } | undefined;
      return {
        status: error.$metadata.httpStatusCode ?? 0,
        name: error.name,
        headers: raw?.headers ?? {},
      };
    }
    throw error;
  }
  throw new RangeError('the request succeeded; a refusal was expected');
}

t.test('reads that meet a delete marker', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = await service.tenant('alice');
  const s3 = s3ClientFor(origin, alice);
  t.teardown(() => s3.destroy());
  const Bucket = 'marked';
  await s3.send(new CreateBucketCommand({ Bucket }));
  await s3.send(
    new PutBucketVersioningCommand({ Bucket, VersioningConfiguration: { Status: 'Enabled' } }),
  );
  const put = await s3.send(new PutObjectCommand({ Bucket, Key: 'k', Body: 'kept' }));
  const deleted = await s3.send(new DeleteObjectCommand({ Bucket, Key: 'k' }));
  t.equal(deleted.DeleteMarker, true);
  const marker = deleted.VersionId ?? '';
  t.not(marker, '');

  const get = await refusalOf(s3.send(new GetObjectCommand({ Bucket, Key: 'k' })));
  t.equal(get.status, 404);
  t.equal(get.name, 'NoSuchKey');
  t.equal(get.headers['x-amz-delete-marker'], 'true', 'the 404 says a delete marker is latest');
  t.equal(get.headers['x-amz-version-id'], marker, "and names the marker's version");
  const head = await refusalOf(s3.send(new HeadObjectCommand({ Bucket, Key: 'k' })));
  t.equal(head.status, 404);
  t.equal(head.headers['x-amz-delete-marker'], 'true', 'HeadObject too');

  const named = await refusalOf(
    s3.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: marker })),
  );
  t.equal(named.status, 405);
  t.equal(named.name, 'MethodNotAllowed');
  t.equal(named.headers['x-amz-delete-marker'], 'true');
  t.equal(named.headers['x-amz-version-id'], marker);
  t.equal(named.headers['allow'], 'DELETE', 'only DELETE applies to a marker');
  const namedHead = await refusalOf(
    s3.send(new HeadObjectCommand({ Bucket, Key: 'k', VersionId: marker })),
  );
  t.equal(namedHead.status, 405);
  t.equal(namedHead.headers['x-amz-delete-marker'], 'true');

  const old = await s3.send(new GetObjectCommand({ Bucket, Key: 'k', VersionId: put.VersionId }));
  t.equal(await old.Body?.transformToString(), 'kept', 'the older version still reads');
  const plain = await refusalOf(s3.send(new GetObjectCommand({ Bucket, Key: 'never' })));
  t.equal(plain.headers['x-amz-delete-marker'], undefined, 'a key never written: no marker');

  const gone = await s3.send(new PutObjectCommand({ Bucket, Key: 'twice', Body: 'x' }));
  const VersionId = gone.VersionId ?? '';
  await s3.send(new DeleteObjectCommand({ Bucket, Key: 'twice', VersionId }));
  const again = await s3.send(new DeleteObjectCommand({ Bucket, Key: 'twice', VersionId }));
  t.equal(again.$metadata.httpStatusCode, 204, 'a version already deleted: 204');
  t.equal(again.VersionId, VersionId, 'naming it');
  const batch = await s3.send(
    new DeleteObjectsCommand({
      Bucket,
      Delete: {
        Objects: [
          { Key: 'twice', VersionId },
          { Key: 'never', VersionId },
        ],
      },
    }),
  );
  t.same(
    (batch.Deleted ?? []).map((entry) => entry.Key),
    ['twice', 'never'],
    'in a batch, both reported deleted',
  );
  t.equal(batch.Errors, undefined, 'and no error');
});
