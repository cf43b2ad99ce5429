// Goal: key rotation through the console API. The key routes keep the admin gates (401 without a
// token; a viewer rotates nothing; the master key only with an unscoped owner token; a
// tenant-scoped operator rotates its own tenant's data key and no other). A dry run answers what
// would be re-sealed and changes nothing. After a tenant data-key rotation, objects written
// before and after it read back byte-exact (small, inline-sized and multi-chunk bodies, and a
// body written again under the new key). After a master-key rotation the fingerprint changes,
// every object still reads, bearer tokens made before it no longer verify while the access keys
// log in again with their unchanged secrets (S3 signing with it too), and the same holds
// after a restart. Every rotation, and each dry run, leaves an audit row.
// Method: the real service on loopback; the data plane through the native API.
import t, { type Test } from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Service, type DataClient } from '../helpers/service.js';
import { consoleCaller } from './console-call.js';
import { masterKeyCheckOf } from '../../src/engine/master-key-check.js';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { s3ClientFor } from '../helpers/s3-sdk.js';

interface KeyState {
  masterKey: { fingerprint: string; since: string };
  tenants: Array<{ tenantId: string; keyGeneration: number; retiredKeys: number }>;
}

const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** A request after a master-key rotation: 503 while the gateway loads the new key, retried. */
async function settled(
  request: () => Promise<{ status: number; bytes: Buffer }>,
): Promise<{ status: number; bytes: Buffer }> {
  for (let attempt = 1; ; attempt += 1) {
    const answer = await request();
    if (answer.status !== 503) return answer;
    if (attempt === 200) throw new Error('the gateway answered 503 for 200 tries after rotation');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** `client.login()`, retried while a listener still loads the new master key (503). */
async function loginSettled(client: DataClient): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await client.login();
      return;
    } catch (error) {
      if (!String(error).includes('login: 503') || attempt === 200) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

async function readsBack(
  t: Test,
  client: DataClient,
  objects: Map<string, string>,
  label: string,
): Promise<void> {
  for (const [key, digest] of objects) {
    const answer = await settled(() => client.get('keys', key));
    t.equal(answer.status, 200, `${label}: ${key} reads`);
    t.equal(sha(answer.bytes), digest, `${label}: ${key} is byte-exact`);
  }
}

t.test('key rotation through the console API', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const viewer = service.adminToken('viewer');
  const scopedOwner = service.adminToken('owner', ['--tenant', 'acme']);
  const scoped = service.adminToken('operator', ['--tenant', 'acme']);
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  await service.tenant('globex', 'read,write,delete,admin', owner);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'keys' } })).status, 201);
  const objects = new Map<string, string>();
  const bodies: Array<[string, Buffer]> = [
    ['small', Buffer.from('hello, keys')],
    ['medium', randomBytes(200_000)],
    ['large', randomBytes(3 * 1024 * 1024)],
  ];
  for (const [key, body] of bodies) {
    t.equal((await acme.put('keys', `before/${key}`, body)).status, 200);
    objects.set(`before/${key}`, sha(body));
  }

  for (const [method, path] of [
    ['GET', '/keys'],
    ['POST', '/master-key/rotate'],
    ['POST', '/tenants/acme/data-key/rotate'],
  ] as const)
    t.match(await call(method, path), { status: 401 }, `${path} needs a token`);
  t.match(await call('POST', '/master-key/rotate', viewer), { status: 403 });
  t.match(await call('POST', '/master-key/rotate', scoped), { status: 403 });
  t.match(await call('POST', '/master-key/rotate', scopedOwner), {
    status: 403,
    json: { message: /tenant-scoped/ },
  });
  t.match(await call('POST', '/tenants/acme/data-key/rotate', viewer), { status: 403 });
  t.match(await call('POST', '/tenants/globex/data-key/rotate', scoped), { status: 403 });
  t.match(await call('POST', '/tenants/nobody/data-key/rotate', owner), { status: 404 });
  t.match(await call('POST', '/master-key/rotate?dryRun=maybe', owner), { status: 400 });

  const first = (await call('GET', '/keys', viewer)).json as KeyState;
  const keyFile = join(service.dataDir, 'keys', 'master.key');
  const fingerprintOf = (): string =>
    masterKeyCheckOf(readFileSync(keyFile)).subarray(0, 8).toString('hex');
  t.equal(first.masterKey.fingerprint, fingerprintOf(), 'the fingerprint is the key file');
  t.same(
    first.tenants.map((entry) => [entry.tenantId, entry.keyGeneration]),
    [
      ['acme', 1],
      ['globex', 1],
    ],
  );
  t.same(
    ((await call('GET', '/keys', scoped)).json as KeyState).tenants.map((e) => e.tenantId),
    ['acme'],
    'a scoped token sees its tenant only',
  );

  // Tenant data key.
  t.match(await call('POST', '/tenants/acme/data-key/rotate?dryRun=true', scoped), {
    status: 200,
    json: { dryRun: true, applied: false, result: { keyGeneration: 2, retiredKeys: 1 } },
  });
  t.match(await call('POST', '/tenants/acme/data-key/rotate', scoped, { reason: 'yearly' }), {
    status: 200,
    json: { tenantId: 'acme', keyGeneration: 2, retiredKeys: 1 },
  });
  for (const [key, body] of bodies) {
    t.equal((await acme.put('keys', `after/${key}`, body)).status, 200);
    objects.set(`after/${key}`, sha(body));
  }
  await readsBack(t, acme, objects, 'after the data-key rotation');

  // Master key. The data-key rotation's re-encryption may drop the retired key at any moment
  // (test/console/reencryption-api.test.ts covers it): the re-seal counts 2 or 3 tenant keys.
  const plan = await call('POST', '/master-key/rotate?dryRun=true', owner, { reason: 'check' });
  t.match(plan, {
    status: 200,
    json: {
      dryRun: true,
      counts: { tenants: 2, tenantKeys: /^[23]$/, accessKeys: 2, webhookSecrets: 0 },
      result: { fingerprint: first.masterKey.fingerprint },
    },
  });
  t.equal(fingerprintOf(), first.masterKey.fingerprint, 'a dry run keeps the key');
  const oldToken = acme.token;
  const rotated = await call('POST', '/master-key/rotate', owner, { reason: 'compromise drill' });
  t.match(rotated, {
    status: 200,
    json: {
      previousFingerprint: first.masterKey.fingerprint,
      counts: { tenants: 2, accessKeys: 2 },
    },
  });
  const fingerprint = (rotated.json as { fingerprint: string }).fingerprint;
  t.not(fingerprint, first.masterKey.fingerprint);
  t.equal(fingerprintOf(), fingerprint, 'the key file holds the new key');
  t.equal(
    ((await call('GET', '/keys', viewer)).json as KeyState).masterKey.fingerprint,
    fingerprint,
  );
  const stale = await settled(() => acme.get('keys', 'before/small'));
  t.equal(stale.status, 401, 'a bearer token from before the rotation no longer verifies');
  await loginSettled(acme);
  t.not(acme.token, oldToken);
  await readsBack(t, acme, objects, 'after the master-key rotation');
  // S3 signs with the secret itself, which the rotation re-sealed unchanged.
  const s3 = s3ClientFor(new URL(service.publicUrl).origin, acme);
  const get = new GetObjectCommand({ Bucket: 'keys', Key: 'before/medium' });
  const bytes = await settled(async () => {
    try {
      const got = await s3.send(get);
      const body = got.Body as { transformToByteArray(): Promise<Uint8Array> };
      return { status: 200, bytes: Buffer.from(await body.transformToByteArray()) };
    } catch (error) {
      // A listener thread that has not yet loaded the new key answers 503 (SDKs retry it).
      return {
        status:
          (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode ?? 0,
        bytes: Buffer.alloc(0),
      };
    }
  });
  t.equal(
    sha(bytes.bytes),
    objects.get('before/medium'),
    'an S3 client signing with the unchanged secret reads after the rotation',
  );
  s3.destroy();
  t.equal((await acme.put('keys', 'later', 'written under the new master key')).status, 200);
  objects.set('later', sha(Buffer.from('written under the new master key')));

  await service.stop();
  await service.launch();
  await acme.login();
  await readsBack(t, acme, objects, 'after a restart');

  const audit = await service.admin('GET', '/audit?limit=1000', owner);
  const rows = (audit.json as { events: Array<Record<string, unknown>> }).events;
  const has = (action: string, extra: Record<string, unknown>): boolean =>
    rows.some(
      (row) => row['action'] === action && Object.entries(extra).every(([k, v]) => row[k] === v),
    );
  t.ok(has('rotateConsoleMasterKey', { reason: 'compromise drill', outcome: 'allowed' }));
  t.ok(has('rotateConsoleMasterKey', { dryRun: true }), 'the dry run is audited as one');
  t.ok(has('rotateConsoleTenantDataKey', { reason: 'yearly', tenantId: 'acme' }));
  t.ok(has('rotateConsoleMasterKey', { outcome: 'denied' }), 'a refusal is audited');
});
