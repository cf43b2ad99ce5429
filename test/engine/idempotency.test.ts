// Goal: an idempotency key is completed or freed only by the request that holds its current
// claim. A retry takes over a `running` key whose gateway process is gone; the dead request's
// commit may still arrive after that (it sat in the engine's socket buffer), and must then write
// nothing, nor may its abandon free the retry's claim. A key whose gateway lives stays in use.
// Method: the engine's operations on a real index in a temporary directory, with the pid of a
// child process that has exited as the dead gateway.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, objectKey } from '../../src/engine/index/schema.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import {
  abandonIdempotent,
  beginIdempotent,
  type BeginResult,
} from '../../src/engine/ops/idempotency.js';
import { errorCode } from '../../src/util/errors.js';
import { loadSettings } from '../../src/util/config.js';
import { tempDir } from './segment-testing.js';

const TENANT = 'acme';
const target = { tenantId: TENANT, bucket: 'box', key: 'k', fingerprint: 'f' };
/** A pid no process has any more: a child that ran and exited. */
const deadPid = spawnSync(process.execPath, ['-e', '0']).pid;

async function fixture(t: Test) {
  const store = IndexStore.open({ path: tempDir(t, 'lw-idem-'), readOnly: false });
  t.teardown(() => store.close());
  const context: EngineContext = {
    store,
    masterKey: randomBytes(32),
    settings: loadSettings({}),
    now: () => Date.now(),
  };
  const segmentId = await store.transact(() => {
    control.createTenant(context, { id: TENANT });
    objects.createBucket(context, { tenantId: TENANT, name: 'box' });
    return segments.allocSegment(context, { ownerPid: process.pid }).segmentId;
  });
  const begin = (ownerPid: number): Promise<BeginResult | string> =>
    store
      .transact(() => beginIdempotent(context, { ...target, ownerPid }))
      .catch((error: unknown) => errorCode(error) ?? 'thrown');
  const commitWith = (
    idempotency: objects.PutObjectArgs['idempotency'],
    fingerprint = target.fingerprint,
  ): Promise<string> =>
    store
      .transact(() =>
        objects.putObject(context, {
          tenantId: TENANT,
          bucket: 'box',
          key: 'k',
          size: 1,
          etag: '"e"',
          contentType: 'application/octet-stream',
          metadata: {},
          checksums: {},
          compressed: false,
          chunks: [
            {
              id: randomBytes(32),
              plainLength: 1,
              location: { segmentId, offset: 64, length: 81, payloadChecksum: 1 },
            },
          ],
          ...(idempotency ? { idempotency: { ...idempotency, fingerprint } } : {}),
        }),
      )
      .then(
        (version) => `committed ${version.seq}`,
        (error: unknown) => errorCode(error) ?? 'thrown',
      );
  const commit = (claim: string): Promise<string> =>
    commitWith({ key: target.key, fingerprint: target.fingerprint, claim }).then((answer) =>
      answer.startsWith('committed') ? 'committed' : answer,
    );
  const versions = (): number => {
    const bucket = objects.requireBucket(context, TENANT, 'box');
    return store.get(DB.objects, objectKey(bucket.id, 'k')) ? 1 : 0;
  };
  return { store, context, begin, commit, commitWith, versions };
}

const claimOf = (result: BeginResult | string): string =>
  typeof result === 'object' && 'claim' in result ? result.claim : '';

t.test("a dead request's late commit writes nothing once a retry took the key", async (t) => {
  const { store, context, begin, commit, versions } = await fixture(t);
  const first = claimOf(await begin(deadPid));
  t.match(first, /^[0-9a-f]{16}$/, 'a begin draws a claim id');
  const retry = claimOf(await begin(process.pid));
  t.ok(retry !== '' && retry !== first, 'the retry takes the key over: its gateway is gone');
  t.equal(await commit(first), 'idempotency_key_in_use', "the dead request's late commit");
  t.equal(versions(), 0, 'wrote nothing');
  await store.transact(() => abandonIdempotent(context, { ...target, claim: first }));
  t.equal(await begin(process.pid), 'idempotency_key_in_use', 'its abandon freed nothing');
  t.equal(await commit(retry), 'committed', "the retry's commit");
  t.equal(versions(), 1);
  t.match(await begin(process.pid), { replay: { key: 'k' } }, 'and a later retry replays');
});

t.test('a key whose gateway lives stays in use', async (t) => {
  const { begin } = await fixture(t);
  t.ok(claimOf(await begin(process.pid)));
  t.equal(await begin(process.pid), 'idempotency_key_in_use');
});

// A body stored before its commit (the ingest stream's small objects) has its key decided in the
// commit itself: the same answers as a begin, without a command of its own.
const inCommit = { key: target.key, fingerprint: target.fingerprint, inCommit: true };

t.test('a key decided in the commit: new, then replayed, then reused', async (t) => {
  const { begin, commitWith, versions } = await fixture(t);
  const first = await commitWith(inCommit);
  t.match(first, /^committed \d+$/, 'a new key commits');
  t.equal(versions(), 1);
  t.equal(await commitWith(inCommit), first, 'the same key again answers the first version');
  t.match(await begin(process.pid), { replay: { key: 'k' } }, 'and a begin replays it too');
  t.equal(await commitWith(inCommit, 'other'), 'idempotency_key_reused', 'another fingerprint');
});

t.test('a key decided in the commit is in use while a begun request runs', async (t) => {
  const { begin, commitWith, versions } = await fixture(t);
  t.ok(claimOf(await begin(process.pid)));
  t.equal(await commitWith(inCommit), 'idempotency_key_in_use');
  t.equal(versions(), 0, 'wrote nothing');
});
