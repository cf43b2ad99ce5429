// Goal: a tenant backup uploaded to another S3 endpoint, incrementally, and restored from it once
// its local copy is gone; the target's secret key is never answered or logged, and survives a
// master-key rotation. Method: two Lightwell services on loopback; the second one's own S3 API is
// the target (its tenant `vault`, bucket `offsite`), read back with the AWS SDK.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { Service, type DataClient } from '../helpers/service.js';
import { s3ClientFor } from '../helpers/s3-sdk.js';
import { consoleCaller } from './console-call.js';
import { sha, waitForBackup, waitForRestore } from './backup-kit.js';

interface Uploaded {
  state: string;
  target: string | null;
  upload: { files: number; bytes: number; copied: number } | null;
  error: string | null;
}

t.test('a tenant backup at another S3 endpoint', async (t) => {
  const scratch = mkdtempSync(join(tmpdir(), 'lw-backup-target-'));
  const root = join(scratch, 'backups');
  const remote = await Service.start();
  const service = await Service.start({ env: { LIGHTWELL_BACKUP_DIRECTORY: root } });
  t.teardown(async () => {
    await service.close();
    await remote.close();
    rmSync(scratch, { recursive: true, force: true });
  });
  const vault = await remote.tenant('vault', 'read,write,delete,admin', remote.adminToken('owner'));
  const origin = new URL(remote.publicUrl).origin;
  const s3 = s3ClientFor(origin, vault);
  await s3.send(new CreateBucketCommand({ Bucket: 'offsite' }));

  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const viewer = service.adminToken('viewer');
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'photos' } })).status, 201);
  const digests = new Map<string, string>();
  const put = async (client: DataClient, key: string, body: Buffer) => {
    t.equal((await client.put('photos', key, body)).status, 200, `photos/${key} is written`);
    digests.set(key, sha(body));
  };
  // Larger than a part: its sealed file goes up as a multipart upload.
  await put(acme, 'large', randomBytes(17 * 1024 * 1024 + 5));
  await put(acme, 'small', Buffer.from('a small photo'));
  await put(acme, 'empty', Buffer.alloc(0));

  const target = {
    name: 'offsite',
    endpoint: origin,
    bucket: 'offsite',
    prefix: 'lightwell/',
    accessKeyId: vault.accessKeyId,
    secretAccessKey: vault.secretKey,
  };
  t.match(await call('POST', '/backup-targets', viewer, target), { status: 403 });
  t.match(await call('POST', '/backup-targets', owner, { ...target, endpoint: 'ftp://x' }), {
    status: 400,
  });
  t.match(await call('POST', '/backup-targets', owner, { ...target, prefix: '../' }), {
    status: 400,
  });
  t.match(await call('POST', '/backup-targets', owner, target), {
    status: 201,
    json: { name: 'offsite', endpoint: origin, accessKeyId: vault.accessKeyId },
  });
  t.match(await call('POST', '/backup-targets', owner, target), { status: 409 });
  const listed = await call('GET', '/backup-targets', viewer);
  t.match(listed, { status: 200, json: { targets: [{ name: 'offsite', prefix: 'lightwell/' }] } });
  t.notOk(JSON.stringify(listed.json).includes(vault.secretKey), 'the secret is never answered');
  t.match(await call('POST', '/backups', owner, { name: 'x', tenantId: 'acme', target: 'nope' }), {
    status: 404,
  });

  t.equal(
    (await call('POST', '/backups', owner, { name: 'acme-1', tenantId: 'acme', target: 'offsite' }))
      .status,
    202,
  );
  const first = (await waitForBackup(call, owner, 'acme-1')) as unknown as Uploaded;
  t.match(first, { state: 'complete', target: 'offsite', upload: { files: 5, copied: 0 } });
  const keys = async (prefix: string) =>
    (
      (await s3.send(new ListObjectsV2Command({ Bucket: 'offsite', Prefix: prefix }))).Contents ??
      []
    )
      .map((object) => object.Key ?? '')
      .sort();
  t.same(
    await keys('lightwell/acme-1/'),
    [
      'lightwell/acme-1/manifest.json',
      'lightwell/acme-1/objects/0',
      'lightwell/acme-1/objects/1',
      'lightwell/acme-1/objects/2',
      'lightwell/acme-1/records',
    ],
    'every file of the backup is at the target',
  );

  // Incremental: the files the backup shares with its base are copied on the endpoint.
  await put(acme, 'later', randomBytes(70_000));
  t.equal(
    (
      await call('POST', '/backups', owner, {
        name: 'acme-2',
        tenantId: 'acme',
        base: 'acme-1',
        target: 'offsite',
      })
    ).status,
    202,
  );
  const second = (await waitForBackup(call, owner, 'acme-2')) as unknown as Uploaded;
  t.equal(second.state, 'complete', `acme-2 is complete (${String(second.error)})`);
  t.match(second.upload, { files: 6, copied: 3 }, "the base's three files are copied there");
  t.equal((await keys('lightwell/acme-2/')).length, 6, 'the incremental backup is whole there');

  // The local copy goes; acme loses an object; the restore fetches the backup from the target.
  rmSync(join(root, 'acme-2'), { recursive: true, force: true });
  t.equal((await acme.request('DELETE', '/buckets/photos/objects/large')).status, 204);
  const plan = await call('POST', '/backups/acme-2/restore?dryRun=true', owner, {
    tenantId: 'acme',
  });
  t.match(plan, { status: 200, json: { counts: { objects: 4 }, blockers: [] } });
  const started = await call('POST', '/backups/acme-2/restore', owner, { tenantId: 'acme' });
  t.equal(started.status, 202, 'the restore is queued');
  t.match(await waitForRestore(call, owner, (started.json as { id: string }).id), {
    state: 'complete',
    objectsDone: 1,
    objectsSkipped: 3,
  });
  for (const [key, digest] of digests) {
    const answer = await acme.get('photos', key);
    t.equal(answer.status, 200, `photos/${key} reads`);
    t.equal(sha(answer.bytes), digest, `photos/${key} is byte-exact`);
  }

  // A rotation re-seals the target's secret and re-wraps the backups' chain key: the next
  // backup still signs with the secret and links from its base, and a backup taken before the
  // rotation restores.
  t.equal((await acme.request('DELETE', '/buckets/photos/objects/small')).status, 204);
  t.equal((await call('POST', '/master-key/rotate', owner)).status, 200, 'the master key rotates');
  const third = await call('POST', '/backups', owner, {
    name: 'acme-3',
    tenantId: 'acme',
    base: 'acme-2',
    target: 'offsite',
  });
  t.equal(third.status, 202);
  t.match(await waitForBackup(call, owner, 'acme-3'), {
    state: 'complete',
    error: null,
    segmentsReused: 3,
    upload: { files: 5, copied: 3 },
  });
  const older = await call('POST', '/backups/acme-1/restore', owner, { tenantId: 'acme' });
  t.equal(older.status, 202, 'a backup taken before the rotation is restored');
  t.match(await waitForRestore(call, owner, (older.json as { id: string }).id), {
    state: 'complete',
    objectsDone: 1,
  });
  // Tokens made before the rotation no longer verify; a listener loading the key answers 503.
  for (let attempt = 1; ; attempt += 1) {
    try {
      await acme.login();
      break;
    } catch (error) {
      if (!String(error).includes('login: 503') || attempt === 200) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
  let small = await acme.get('photos', 'small');
  for (let attempt = 1; small.status === 503 && attempt < 200; attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    small = await acme.get('photos', 'small');
  }
  t.equal(small.status, 200, 'small reads after the rotation');
  t.equal(sha(small.bytes), digests.get('small'), 'small is back, byte-exact');

  // A whole-store backup goes there too, but for the master key, which never leaves.
  t.equal(
    (await call('POST', '/backups', owner, { name: 'whole-1', target: 'offsite' })).status,
    202,
  );
  t.match(await waitForBackup(call, owner, 'whole-1'), { state: 'complete', error: null });
  const whole = await keys('lightwell/whole-1/');
  t.ok(whole.includes('lightwell/whole-1/manifest.json'), 'its manifest is there');
  t.ok(whole.includes('lightwell/whole-1/index/data.mdb'), 'its index is there');
  t.ok(
    whole.some((key) => key.startsWith('lightwell/whole-1/segments/')),
    'its segments are there',
  );
  t.notOk(whole.includes('lightwell/whole-1/keys/master.key'), 'the master key is not');

  // A target whose secret is wrong: the backup fails, saying why, and keeps nothing.
  const wrong = { ...target, name: 'wrong', secretAccessKey: 'not-the-secret-0123456789' };
  t.equal((await call('POST', '/backup-targets', owner, wrong)).status, 201);
  t.equal(
    (await call('POST', '/backups', owner, { name: 'acme-4', tenantId: 'acme', target: 'wrong' }))
      .status,
    202,
  );
  t.match(await waitForBackup(call, owner, 'acme-4'), {
    state: 'failed',
    error: /unavailable: .*403.*SignatureDoesNotMatch|unavailable: .*40[13]/,
  });
  const backups = JSON.stringify((await call('GET', '/backups', viewer)).json);
  for (const secret of [vault.secretKey, wrong.secretAccessKey]) {
    t.notOk(backups.includes(secret), 'no backup row holds a secret');
    t.notOk(service.output.includes(secret), 'no log line holds a secret');
  }
  t.equal((await call('DELETE', '/backup-targets/wrong', owner)).status, 200);
  t.match(await call('GET', '/backup-targets', viewer), {
    json: { targets: [{ name: 'offsite' }] },
  });
});
