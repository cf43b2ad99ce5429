// Goal: a tenant backup restored into a new tenant gives back everything S3 shows of the tenant,
// not only its current objects: every version with its version id (noncurrent ones noncurrent),
// delete markers, retention and legal holds (WORM survives), the bucket's object lock default,
// versioning, tags, CORS, policy, public access block and lifecycle, a multipart object's ETag
// and its reads by part number, object tags, metadata and headers; an SSE-KMS version written
// under the old tenant's own key reports the new tenant's key. Method: the real service, the
// AWS SDK on its S3 listener, the console API; the old tenant's buckets are emptied (bypassing
// governance) and deleted so their names are free, then the backup goes into a new tenant.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetBucketCorsCommand,
  GetBucketLifecycleConfigurationCommand,
  GetBucketPolicyCommand,
  GetBucketTaggingCommand,
  GetBucketVersioningCommand,
  GetObjectCommand,
  GetObjectLegalHoldCommand,
  GetObjectLockConfigurationCommand,
  GetObjectRetentionCommand,
  GetObjectTaggingCommand,
  GetPublicAccessBlockCommand,
  HeadObjectCommand,
  ListObjectVersionsCommand,
  PutBucketCorsCommand,
  PutBucketLifecycleConfigurationCommand,
  PutBucketPolicyCommand,
  PutBucketTaggingCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectLockConfigurationCommand,
  PutPublicAccessBlockCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { s3ClientFor } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';
import { consoleCaller } from './console-call.js';
import { sha, waitForBackup, waitForRestore } from './backup-kit.js';

const MiB = 1024 * 1024;

async function bytesOf(s3: S3Client, Bucket: string, Key: string, extra: object = {}) {
  const got = await s3.send(new GetObjectCommand({ Bucket, Key, ...extra }));
  return Buffer.from(await (got.Body?.transformToByteArray() ?? Promise.resolve(new Uint8Array())));
}

/** Every version and delete marker of a bucket, in S3's order, as the test compares them. */
async function versionsOf(s3: S3Client, Bucket: string) {
  const listed = await s3.send(new ListObjectVersionsCommand({ Bucket }));
  return [
    ...(listed.Versions ?? []).map((v) => ({
      key: v.Key,
      id: v.VersionId,
      latest: v.IsLatest,
      etag: v.ETag,
      size: v.Size,
      marker: false,
    })),
    ...(listed.DeleteMarkers ?? []).map((v) => ({
      key: v.Key,
      id: v.VersionId,
      latest: v.IsLatest,
      etag: undefined,
      size: undefined,
      marker: true,
    })),
  ].sort((a, b) => `${a.key ?? ''}/${a.id ?? ''}`.localeCompare(`${b.key ?? ''}/${b.id ?? ''}`));
}

/** What S3 shows of the tenant's buckets and objects beyond their bytes. */
async function settingsOf(s3: S3Client) {
  const lock = await s3.send(new GetObjectLockConfigurationCommand({ Bucket: 'vault' }));
  const versioning = await s3.send(new GetBucketVersioningCommand({ Bucket: 'vault' }));
  const tags = await s3.send(new GetBucketTaggingCommand({ Bucket: 'vault' }));
  const cors = await s3.send(new GetBucketCorsCommand({ Bucket: 'site' }));
  const policy = await s3.send(new GetBucketPolicyCommand({ Bucket: 'site' }));
  const block = await s3.send(new GetPublicAccessBlockCommand({ Bucket: 'site' }));
  const lifecycle = await s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'site' }));
  const siteVersioning = await s3.send(new GetBucketVersioningCommand({ Bucket: 'site' }));
  const big = await s3.send(new HeadObjectCommand({ Bucket: 'site', Key: 'big' }));
  const part = await s3.send(new HeadObjectCommand({ Bucket: 'site', Key: 'big', PartNumber: 2 }));
  const tagged = await s3.send(new HeadObjectCommand({ Bucket: 'site', Key: 'tagged' }));
  const objectTags = await s3.send(new GetObjectTaggingCommand({ Bucket: 'site', Key: 'tagged' }));
  return {
    lock: lock.ObjectLockConfiguration,
    versioning: versioning.Status,
    siteVersioning: siteVersioning.Status,
    tags: tags.TagSet,
    cors: cors.CORSRules,
    policy: JSON.parse(policy.Policy ?? '{}') as unknown,
    block: block.PublicAccessBlockConfiguration,
    lifecycle: lifecycle.Rules,
    vault: await versionsOf(s3, 'vault'),
    site: await versionsOf(s3, 'site'),
    big: { etag: big.ETag, parts: part.PartsCount, part2: part.ContentLength },
    tagged: {
      type: tagged.ContentType,
      cache: tagged.CacheControl,
      metadata: tagged.Metadata,
      tags: objectTags.TagSet,
    },
  };
}

t.test('a tenant backup restores every version and setting into a new tenant', async (t) => {
  const scratch = mkdtempSync(join(tmpdir(), 'lw-tenant-fidelity-'));
  const service = await Service.start({
    env: { LIGHTWELL_BACKUP_DIRECTORY: join(scratch, 'backups') },
  });
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const owner = service.adminToken('owner');
  const s3 = s3ClientFor(origin, await service.tenant('acme', 'read,write,delete,admin', owner));
  t.teardown(async () => {
    s3.destroy();
    await service.close();
    rmSync(scratch, { recursive: true, force: true });
  });
  const call = consoleCaller(service);

  // vault: object lock with a default retention, versions, a legal hold, a delete marker.
  await s3.send(new CreateBucketCommand({ Bucket: 'vault', ObjectLockEnabledForBucket: true }));
  await s3.send(
    new PutObjectLockConfigurationCommand({
      Bucket: 'vault',
      ObjectLockConfiguration: {
        ObjectLockEnabled: 'Enabled',
        Rule: { DefaultRetention: { Mode: 'GOVERNANCE', Days: 2 } },
      },
    }),
  );
  await s3.send(
    new PutBucketTaggingCommand({
      Bucket: 'vault',
      Tagging: { TagSet: [{ Key: 'k', Value: 'v' }] },
    }),
  );
  const first = randomBytes(70_000);
  const second = randomBytes(1000);
  const v1 = await s3.send(new PutObjectCommand({ Bucket: 'vault', Key: 'doc', Body: first }));
  const v2 = await s3.send(new PutObjectCommand({ Bucket: 'vault', Key: 'doc', Body: second }));
  await s3.send(
    new PutObjectLegalHoldCommand({
      Bucket: 'vault',
      Key: 'doc',
      VersionId: v1.VersionId,
      LegalHold: { Status: 'ON' },
    }),
  );
  await s3.send(new PutObjectCommand({ Bucket: 'vault', Key: 'gone', Body: 'soon a marker' }));
  await s3.send(new DeleteObjectCommand({ Bucket: 'vault', Key: 'gone' }));
  const retentionBefore = await s3.send(
    new GetObjectRetentionCommand({ Bucket: 'vault', Key: 'doc', VersionId: v2.VersionId }),
  );

  // site: settings, a multipart object, tags and headers, SSE-KMS under the tenant's own key.
  await s3.send(new CreateBucketCommand({ Bucket: 'site' }));
  await s3.send(
    new PutBucketVersioningCommand({
      Bucket: 'site',
      VersioningConfiguration: { Status: 'Suspended' },
    }),
  );
  await s3.send(
    new PutBucketCorsCommand({
      Bucket: 'site',
      CORSConfiguration: {
        CORSRules: [{ AllowedMethods: ['GET'], AllowedOrigins: ['https://example.com'] }],
      },
    }),
  );
  const policy = {
    Version: '2012-10-17',
    Statement: [
      {
        Effect: 'Deny',
        Principal: '*',
        Action: 's3:DeleteObject',
        Resource: 'arn:aws:s3:::site/keep/*',
      },
    ],
  };
  await s3.send(new PutBucketPolicyCommand({ Bucket: 'site', Policy: JSON.stringify(policy) }));
  await s3.send(
    new PutPublicAccessBlockCommand({
      Bucket: 'site',
      PublicAccessBlockConfiguration: { BlockPublicAcls: true, RestrictPublicBuckets: true },
    }),
  );
  await s3.send(
    new PutBucketLifecycleConfigurationCommand({
      Bucket: 'site',
      LifecycleConfiguration: {
        Rules: [
          { ID: 'tmp', Status: 'Enabled', Filter: { Prefix: 'tmp/' }, Expiration: { Days: 30 } },
        ],
      },
    }),
  );
  const parts = [randomBytes(5 * MiB), randomBytes(MiB + 3)];
  const upload = await s3.send(new CreateMultipartUploadCommand({ Bucket: 'site', Key: 'big' }));
  const etags: string[] = [];
  for (const [index, body] of parts.entries()) {
    const part = await s3.send(
      new UploadPartCommand({
        Bucket: 'site',
        Key: 'big',
        UploadId: upload.UploadId,
        PartNumber: index + 1,
        Body: body,
      }),
    );
    etags.push(part.ETag ?? '');
  }
  await s3.send(
    new CompleteMultipartUploadCommand({
      Bucket: 'site',
      Key: 'big',
      UploadId: upload.UploadId,
      MultipartUpload: { Parts: etags.map((ETag, index) => ({ ETag, PartNumber: index + 1 })) },
    }),
  );
  await s3.send(
    new PutObjectCommand({
      Bucket: 'site',
      Key: 'tagged',
      Body: 'with headers',
      ContentType: 'text/x-test',
      CacheControl: 'max-age=60',
      Metadata: { colour: 'blue' },
      Tagging: 'team=ops',
    }),
  );
  await s3.send(
    new PutObjectCommand({
      Bucket: 'site',
      Key: 'secret',
      Body: 'kms',
      ServerSideEncryption: 'aws:kms',
    }),
  );
  const before = await settingsOf(s3);
  t.equal(before.big.parts, 2, 'the multipart object has two parts');

  t.equal(
    (await call('POST', '/backups', owner, { name: 'acme-all', tenantId: 'acme' })).status,
    202,
  );
  t.match(await waitForBackup(call, owner, 'acme-all'), {
    state: 'complete',
    counts: { buckets: 2, versions: 7 },
  });

  // Empty and delete acme's buckets so that their names are free for the new tenant.
  await s3.send(
    new PutObjectLegalHoldCommand({
      Bucket: 'vault',
      Key: 'doc',
      VersionId: v1.VersionId,
      LegalHold: { Status: 'OFF' },
    }),
  );
  for (const bucket of ['vault', 'site']) {
    for (const version of await versionsOf(s3, bucket))
      await s3.send(
        new DeleteObjectCommand({
          Bucket: bucket,
          Key: version.key,
          VersionId: version.id,
          BypassGovernanceRetention: true,
        }),
      );
    await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
  }

  const phoenixClient = await service.tenant('phoenix', 'read,write,delete,admin', owner);
  const phoenix = s3ClientFor(origin, phoenixClient);
  t.teardown(() => phoenix.destroy());
  const started = await call('POST', '/backups/acme-all/restore', owner, { tenantId: 'phoenix' });
  t.equal(started.status, 202, 'the restore is queued');
  t.match(await waitForRestore(call, owner, (started.json as { id: string }).id), {
    state: 'complete',
    objectsTotal: 7,
    objectsDone: 7,
    objectsSkipped: 0,
    bucketsCreated: 2,
  });

  const after = await settingsOf(phoenix);
  t.same(after, before, 'every version and setting S3 shows is as it was');
  t.same(await bytesOf(phoenix, 'vault', 'doc'), second, 'the current version reads back');
  t.equal(
    sha(await bytesOf(phoenix, 'vault', 'doc', { VersionId: v1.VersionId })),
    sha(first),
    'the noncurrent version reads back by its version id',
  );
  t.same(
    await bytesOf(phoenix, 'site', 'big', { PartNumber: 2 }),
    parts[1],
    'a part of the multipart object reads back by its number',
  );
  const hold = await phoenix.send(
    new GetObjectLegalHoldCommand({ Bucket: 'vault', Key: 'doc', VersionId: v1.VersionId }),
  );
  t.equal(hold.LegalHold?.Status, 'ON', 'the legal hold is kept');
  const retention = await phoenix.send(
    new GetObjectRetentionCommand({ Bucket: 'vault', Key: 'doc', VersionId: v2.VersionId }),
  );
  t.same(retention.Retention, retentionBefore.Retention, 'the retention is kept');
  const refused = await phoenix
    .send(new DeleteObjectCommand({ Bucket: 'vault', Key: 'doc', VersionId: v2.VersionId }))
    .then(
      () => 'deleted',
      (error: unknown) => (error as { name: string }).name,
    );
  t.equal(refused, 'AccessDenied', 'a retained version cannot be deleted after the restore');
  const secret = await phoenix.send(new HeadObjectCommand({ Bucket: 'site', Key: 'secret' }));
  t.equal(secret.ServerSideEncryption, 'aws:kms');
  t.equal(secret.SSEKMSKeyId, 'phoenix', "the old tenant's own key becomes the new tenant's");
});
