// Goal: S3 object lock through the AWS SDK as AWS defines it: the bucket's configuration and
// default retention, retention and legal hold per version, the x-amz-object-lock-* headers of
// PUT, copy and multipart create, deletes gated (versioned deletes of protected versions refused,
// delete markers allowed), GOVERNANCE bypassed only by an admin-scoped key and audited, and the
// refusals (malformed configurations, buckets without lock, other tenants).
// Method: a real `lightwell serve`, two tenants (alice with an admin key and a read/write/delete
// key, bob), @aws-sdk/client-s3.
import t from 'tap';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectLegalHoldCommand,
  GetObjectLockConfigurationCommand,
  GetObjectRetentionCommand,
  HeadObjectCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectLockConfigurationCommand,
  PutObjectRetentionCommand,
  UploadPartCommand,
  type ObjectLockConfiguration,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

const DAY_MS = 86_400_000;

t.test('object lock through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const admin = s3ClientFor(origin, await service.tenant('alice'));
  const plain = s3ClientFor(origin, await service.tenant('alice', 'read,write,delete'));
  const bob = s3ClientFor(origin, await service.tenant('bob'));
  t.teardown(() => [admin, plain, bob].forEach((client) => client.destroy()));
  await admin.send(new CreateBucketCommand({ Bucket: 'vault', ObjectLockEnabledForBucket: true }));
  await admin.send(new CreateBucketCommand({ Bucket: 'plain' }));
  const future = (days: number): Date =>
    new Date(Math.floor(Date.now() / 1000) * 1000 + days * DAY_MS);

  await t.test('the bucket configuration and its default retention', async (t) => {
    const empty = await admin.send(new GetObjectLockConfigurationCommand({ Bucket: 'vault' }));
    t.same(empty.ObjectLockConfiguration, { ObjectLockEnabled: 'Enabled' });
    const conf: ObjectLockConfiguration = {
      ObjectLockEnabled: 'Enabled',
      Rule: { DefaultRetention: { Mode: 'GOVERNANCE', Days: 1 } },
    };
    await admin.send(
      new PutObjectLockConfigurationCommand({ Bucket: 'vault', ObjectLockConfiguration: conf }),
    );
    const got = await admin.send(new GetObjectLockConfigurationCommand({ Bucket: 'vault' }));
    t.same(got.ObjectLockConfiguration, conf);

    const put = (Bucket: string, conf: unknown): Promise<unknown> =>
      admin.send(
        new PutObjectLockConfigurationCommand({
          Bucket,
          ObjectLockConfiguration: conf as ObjectLockConfiguration,
        }),
      );
    const rule = (retention: Record<string, unknown>): unknown => ({
      ObjectLockEnabled: 'Enabled',
      Rule: { DefaultRetention: retention },
    });
    t.same(await s3ErrorOf(put('vault', rule({ Mode: 'GOVERNANCE', Days: 1, Years: 1 }))), {
      name: 'MalformedXML',
      status: 400,
    });
    t.same(await s3ErrorOf(put('vault', rule({ Mode: 'GOVERNANCE', Days: 0 }))), {
      name: 'InvalidRetentionPeriod',
      status: 400,
    });
    t.same(await s3ErrorOf(put('vault', rule({ Mode: 'ABC', Days: 1 }))), {
      name: 'MalformedXML',
      status: 400,
    });
    t.same(await s3ErrorOf(put('vault', { ObjectLockEnabled: 'Disabled' })), {
      name: 'MalformedXML',
      status: 400,
    });
    t.same(
      await s3ErrorOf(admin.send(new GetObjectLockConfigurationCommand({ Bucket: 'plain' }))),
      { name: 'ObjectLockConfigurationNotFoundError', status: 404 },
    );
    t.same(await s3ErrorOf(put('plain', rule({ Mode: 'GOVERNANCE', Days: 1 }))), {
      name: 'InvalidBucketState',
      status: 409,
    });
    t.same(
      await s3ErrorOf(
        admin.send(
          new PutBucketVersioningCommand({
            Bucket: 'vault',
            VersioningConfiguration: { Status: 'Suspended' },
          }),
        ),
      ),
      { name: 'InvalidBucketState', status: 409 },
    );
    t.same(await s3ErrorOf(put('nosuch', rule({ Mode: 'GOVERNANCE', Days: 1 }))), {
      name: 'NoSuchBucket',
      status: 404,
    });
    t.same(await s3ErrorOf(bob.send(new GetObjectLockConfigurationCommand({ Bucket: 'vault' }))), {
      name: 'AccessDenied',
      status: 403,
    });
    t.same(
      await s3ErrorOf(
        bob.send(
          new PutObjectLockConfigurationCommand({ Bucket: 'vault', ObjectLockConfiguration: conf }),
        ),
      ),
      {
        name: 'AccessDenied',
        status: 403,
      },
    );

    // A versioned bucket may be given object lock after its creation.
    await admin.send(new CreateBucketCommand({ Bucket: 'later' }));
    await admin.send(
      new PutBucketVersioningCommand({
        Bucket: 'later',
        VersioningConfiguration: { Status: 'Enabled' },
      }),
    );
    await put('later', rule({ Mode: 'COMPLIANCE', Years: 1 }));
    const later = await admin.send(new GetObjectLockConfigurationCommand({ Bucket: 'later' }));
    t.same(later.ObjectLockConfiguration?.Rule?.DefaultRetention, { Mode: 'COMPLIANCE', Years: 1 });

    // New versions take the default; an explicit lock overrides it.
    const before = Date.now();
    const written = await admin.send(
      new PutObjectCommand({ Bucket: 'vault', Key: 'd', Body: 'x' }),
    );
    const head = await admin.send(
      new HeadObjectCommand({ Bucket: 'vault', Key: 'd', VersionId: written.VersionId }),
    );
    t.equal(head.ObjectLockMode, 'GOVERNANCE');
    const until = head.ObjectLockRetainUntilDate?.getTime() ?? 0;
    t.ok(until >= before + DAY_MS - 1000 && until <= Date.now() + DAY_MS + 1000, 'one day on');
    const retention = await admin.send(
      new GetObjectRetentionCommand({ Bucket: 'vault', Key: 'd' }),
    );
    t.equal(retention.Retention?.Mode, 'GOVERNANCE');
    const date = future(30);
    const explicit = await admin.send(
      new PutObjectCommand({
        Bucket: 'vault',
        Key: 'e',
        Body: 'x',
        ObjectLockMode: 'COMPLIANCE',
        ObjectLockRetainUntilDate: date,
        ObjectLockLegalHoldStatus: 'ON',
      }),
    );
    const explicitHead = await admin.send(
      new HeadObjectCommand({ Bucket: 'vault', Key: 'e', VersionId: explicit.VersionId }),
    );
    t.equal(explicitHead.ObjectLockMode, 'COMPLIANCE');
    t.equal(explicitHead.ObjectLockRetainUntilDate?.getTime(), date.getTime());
    t.equal(explicitHead.ObjectLockLegalHoldStatus, 'ON');
  });

  await t.test('GOVERNANCE retention: deletes, shortening, bypass', async (t) => {
    const written = await admin.send(
      new PutObjectCommand({
        Bucket: 'vault',
        Key: 'g',
        Body: 'x',
        ObjectLockMode: 'GOVERNANCE',
        ObjectLockRetainUntilDate: future(10),
      }),
    );
    const versionId = written.VersionId;
    const del = (client: typeof admin, bypass?: boolean): Promise<unknown> =>
      client.send(
        new DeleteObjectCommand({
          Bucket: 'vault',
          Key: 'g',
          VersionId: versionId,
          ...(bypass ? { BypassGovernanceRetention: true } : {}),
        }),
      );
    t.same(await s3ErrorOf(del(admin)), { name: 'AccessDenied', status: 403 });
    t.same(await s3ErrorOf(del(plain, true)), { name: 'AccessDenied', status: 403 }, 'no admin');
    t.same(
      await s3ErrorOf(
        bob.send(
          new DeleteObjectCommand({
            Bucket: 'vault',
            Key: 'g',
            VersionId: versionId,
            BypassGovernanceRetention: true,
          }),
        ),
      ),
      {
        name: 'AccessDenied',
        status: 403,
      },
    );

    // A delete without a version id writes a delete marker: allowed.
    const marker = await admin.send(new DeleteObjectCommand({ Bucket: 'vault', Key: 'g' }));
    t.equal(marker.DeleteMarker, true);
    t.same(await s3ErrorOf(del(admin)), { name: 'AccessDenied', status: 403 }, 'still protected');

    const retention = (Mode: 'GOVERNANCE' | 'COMPLIANCE', days: number, bypass = false) =>
      new PutObjectRetentionCommand({
        Bucket: 'vault',
        Key: 'g',
        VersionId: versionId,
        Retention: { Mode, RetainUntilDate: future(days) },
        ...(bypass ? { BypassGovernanceRetention: true } : {}),
      });
    await admin.send(retention('GOVERNANCE', 20));
    t.same(await s3ErrorOf(admin.send(retention('GOVERNANCE', 5))), {
      name: 'AccessDenied',
      status: 403,
    });
    t.same(await s3ErrorOf(admin.send(retention('COMPLIANCE', 20))), {
      name: 'AccessDenied',
      status: 403,
    });
    t.same(await s3ErrorOf(plain.send(retention('GOVERNANCE', 5, true))), {
      name: 'AccessDenied',
      status: 403,
    });
    await admin.send(retention('GOVERNANCE', 5, true));
    const got = await admin.send(
      new GetObjectRetentionCommand({ Bucket: 'vault', Key: 'g', VersionId: versionId }),
    );
    t.equal(got.Retention?.RetainUntilDate?.getTime(), future(5).getTime(), 'shortened by bypass');

    t.same(await s3ErrorOf(del(admin, true)), { name: 'none', status: 0 }, 'bypassed');
    const audit = await service.admin(
      'GET',
      '/audit?tenant=alice&limit=1000',
      service.adminToken(),
    );
    const rows = (audit.json as { events: Array<Record<string, unknown>> }).events;
    const bypassed = rows.filter(
      (row) =>
        row['action'] === 's3:DeleteObject' && row['reason'] === 'bypass-governance-retention',
    );
    t.equal(bypassed.length, 1, 'the bypassing delete is audited as one');
    t.equal(bypassed[0]?.['outcome'], 'allowed');
  });

  await t.test('COMPLIANCE retention and legal hold are never bypassed', async (t) => {
    const written = await admin.send(
      new PutObjectCommand({
        Bucket: 'vault',
        Key: 'c',
        Body: 'x',
        ObjectLockMode: 'COMPLIANCE',
        ObjectLockRetainUntilDate: future(3),
      }),
    );
    const versionId = written.VersionId;
    t.same(
      await s3ErrorOf(
        admin.send(
          new DeleteObjectCommand({
            Bucket: 'vault',
            Key: 'c',
            VersionId: versionId,
            BypassGovernanceRetention: true,
          }),
        ),
      ),
      { name: 'AccessDenied', status: 403 },
    );
    t.same(
      await s3ErrorOf(
        admin.send(
          new PutObjectRetentionCommand({
            Bucket: 'vault',
            Key: 'c',
            VersionId: versionId,
            Retention: { Mode: 'GOVERNANCE', RetainUntilDate: future(3) },
            BypassGovernanceRetention: true,
          }),
        ),
      ),
      { name: 'AccessDenied', status: 403 },
    );

    const held = await admin.send(new PutObjectCommand({ Bucket: 'vault', Key: 'h', Body: 'x' }));
    // The bucket's default (GOVERNANCE, one day) applies; a legal hold stops even a bypass.
    await admin.send(
      new PutObjectLegalHoldCommand({
        Bucket: 'vault',
        Key: 'h',
        VersionId: held.VersionId,
        LegalHold: { Status: 'ON' },
      }),
    );
    const hold = await admin.send(new GetObjectLegalHoldCommand({ Bucket: 'vault', Key: 'h' }));
    t.equal(hold.LegalHold?.Status, 'ON');
    const delHeld = () =>
      admin.send(
        new DeleteObjectCommand({
          Bucket: 'vault',
          Key: 'h',
          VersionId: held.VersionId,
          BypassGovernanceRetention: true,
        }),
      );
    t.same(await s3ErrorOf(delHeld()), { name: 'AccessDenied', status: 403 });
    t.same(
      await s3ErrorOf(
        admin.send(
          new PutObjectLegalHoldCommand({
            Bucket: 'vault',
            Key: 'h',
            LegalHold: { Status: 'MAYBE' as never },
          }),
        ),
      ),
      { name: 'MalformedXML', status: 400 },
    );
    t.same(
      await s3ErrorOf(
        bob.send(
          new PutObjectLegalHoldCommand({
            Bucket: 'vault',
            Key: 'h',
            LegalHold: { Status: 'OFF' },
          }),
        ),
      ),
      { name: 'AccessDenied', status: 403 },
    );
    await admin.send(
      new PutObjectLegalHoldCommand({
        Bucket: 'vault',
        Key: 'h',
        VersionId: held.VersionId,
        LegalHold: { Status: 'OFF' },
      }),
    );
    t.same(
      await s3ErrorOf(delHeld()),
      { name: 'none', status: 0 },
      'hold off, GOVERNANCE bypassed',
    );

    // DeleteObjects: the protected version is an error entry, the other one is deleted.
    const free = await plain.send(new PutObjectCommand({ Bucket: 'plain', Key: 'f', Body: 'x' }));
    t.equal(free.VersionId, undefined);
    const other = await admin.send(new PutObjectCommand({ Bucket: 'vault', Key: 'o', Body: 'x' }));
    await admin.send(
      new PutObjectRetentionCommand({
        Bucket: 'vault',
        Key: 'o',
        VersionId: other.VersionId,
        Retention: {},
        BypassGovernanceRetention: true,
      }),
    );
    const batch = await admin.send(
      new DeleteObjectsCommand({
        Bucket: 'vault',
        Delete: {
          Objects: [
            { Key: 'c', VersionId: versionId },
            { Key: 'o', VersionId: other.VersionId },
          ],
        },
      }),
    );
    t.same(
      batch.Errors?.map((error) => [error.Key, error.Code]),
      [['c', 'AccessDenied']],
    );
    t.same(
      batch.Deleted?.map((deleted) => deleted.Key),
      ['o'],
      'a version whose retention was removed (bypass) is deleted',
    );
  });

  await t.test('locks on copies and multipart uploads', async (t) => {
    const date = future(2);
    const source = await admin.send(
      new PutObjectCommand({
        Bucket: 'vault',
        Key: 'src',
        Body: 'x',
        ObjectLockMode: 'COMPLIANCE',
        ObjectLockRetainUntilDate: date,
      }),
    );
    t.ok(source.VersionId);
    const copy = await admin.send(
      new CopyObjectCommand({ Bucket: 'vault', Key: 'copy', CopySource: 'vault/src' }),
    );
    const copyHead = await admin.send(
      new HeadObjectCommand({ Bucket: 'vault', Key: 'copy', VersionId: copy.VersionId }),
    );
    t.equal(copyHead.ObjectLockMode, 'GOVERNANCE', "the bucket's default, not the source's lock");
    const locked = await admin.send(
      new CopyObjectCommand({
        Bucket: 'vault',
        Key: 'copy2',
        CopySource: 'vault/src',
        ObjectLockMode: 'COMPLIANCE',
        ObjectLockRetainUntilDate: date,
        ObjectLockLegalHoldStatus: 'ON',
      }),
    );
    const lockedHead = await admin.send(
      new HeadObjectCommand({ Bucket: 'vault', Key: 'copy2', VersionId: locked.VersionId }),
    );
    t.equal(lockedHead.ObjectLockMode, 'COMPLIANCE');
    t.equal(lockedHead.ObjectLockLegalHoldStatus, 'ON');

    const created = await admin.send(
      new CreateMultipartUploadCommand({
        Bucket: 'vault',
        Key: 'mp',
        ObjectLockMode: 'COMPLIANCE',
        ObjectLockRetainUntilDate: date,
      }),
    );
    const part = await admin.send(
      new UploadPartCommand({
        Bucket: 'vault',
        Key: 'mp',
        UploadId: created.UploadId,
        PartNumber: 1,
        Body: 'abc',
      }),
    );
    const done = await admin.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'vault',
        Key: 'mp',
        UploadId: created.UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
    const mpHead = await admin.send(
      new HeadObjectCommand({ Bucket: 'vault', Key: 'mp', VersionId: done.VersionId }),
    );
    t.equal(mpHead.ObjectLockMode, 'COMPLIANCE');
    t.equal(mpHead.ObjectLockRetainUntilDate?.getTime(), date.getTime());
    t.same(
      await s3ErrorOf(
        admin.send(
          new DeleteObjectCommand({ Bucket: 'vault', Key: 'mp', VersionId: done.VersionId }),
        ),
      ),
      { name: 'AccessDenied', status: 403 },
    );
  });

  await t.test('refusals of bad lock requests', async (t) => {
    t.same(
      await s3ErrorOf(
        plain.send(
          new PutObjectCommand({
            Bucket: 'plain',
            Key: 'x',
            Body: 'x',
            ObjectLockMode: 'GOVERNANCE',
            ObjectLockRetainUntilDate: future(1),
          }),
        ),
      ),
      { name: 'InvalidRequest', status: 400 },
      'a lock in a bucket without object lock',
    );
    t.same(
      await s3ErrorOf(
        admin.send(
          new PutObjectCommand({
            Bucket: 'vault',
            Key: 'x',
            Body: 'x',
            ObjectLockMode: 'GOVERNANCE',
          }),
        ),
      ),
      { name: 'InvalidArgument', status: 400 },
      'a mode without a date',
    );
    t.same(
      await s3ErrorOf(
        admin.send(
          new PutObjectCommand({
            Bucket: 'vault',
            Key: 'x',
            Body: 'x',
            ObjectLockMode: 'GOVERNANCE',
            ObjectLockRetainUntilDate: new Date(Date.now() - DAY_MS),
          }),
        ),
      ),
      { name: 'InvalidArgument', status: 400 },
      'a date in the past',
    );
    await plain.send(new PutObjectCommand({ Bucket: 'plain', Key: 'p', Body: 'x' }));
    for (const command of [
      new GetObjectRetentionCommand({ Bucket: 'plain', Key: 'p' }),
      new GetObjectLegalHoldCommand({ Bucket: 'plain', Key: 'p' }),
      new PutObjectLegalHoldCommand({ Bucket: 'plain', Key: 'p', LegalHold: { Status: 'ON' } }),
      new PutObjectRetentionCommand({
        Bucket: 'plain',
        Key: 'p',
        Retention: { Mode: 'GOVERNANCE', RetainUntilDate: future(1) },
      }),
    ])
      t.same(await s3ErrorOf(admin.send(command as never)), {
        name: 'InvalidRequest',
        status: 400,
      });
    const fresh = await admin.send(new PutObjectCommand({ Bucket: 'later', Key: 'n', Body: 'x' }));
    t.ok(fresh.VersionId);
    t.same(
      await s3ErrorOf(admin.send(new GetObjectLegalHoldCommand({ Bucket: 'later', Key: 'n' }))),
      { name: 'NoSuchObjectLockConfiguration', status: 404 },
    );
    t.same(
      await s3ErrorOf(
        admin.send(
          new PutObjectRetentionCommand({
            Bucket: 'vault',
            Key: 'nosuch',
            Retention: { Mode: 'GOVERNANCE', RetainUntilDate: future(1) },
          }),
        ),
      ),
      { name: 'NoSuchKey', status: 404 },
    );
    t.same(
      await s3ErrorOf(bob.send(new GetObjectRetentionCommand({ Bucket: 'vault', Key: 'd' }))),
      { name: 'AccessDenied', status: 403 },
    );
  });
});
