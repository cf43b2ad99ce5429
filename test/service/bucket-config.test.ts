// Goal: the service's bucket configuration rules that the native API renders: CORS (the rules
// stored as validated, actual-response headers with `Vary: Origin` wherever rules exist, a
// preflight refused without a matching rule) and notifications (a private target refused unless
// allowed, secrets answered only for new ids, the delivery status counters and the head of each
// target's queue).
// Method: the functions called directly with a commit of this test's own; the delivery status
// on a real LMDB environment in a temp directory.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CommandArgs, CommandResult, TransactionalName } from '../../src/engine/commands.js';
import type { ObjectService } from '../../src/service/objects.js';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  bucketKeyPrefix,
  DB,
  outboxKey,
  type BucketRecord,
} from '../../src/engine/index/schema.js';
import {
  corsHeadersFor,
  corsRulesOf,
  deleteBucketCors,
  preflightCors,
  putBucketCors,
} from '../../src/service/cors.js';
import { deliveryStatus, putNotificationConfigs } from '../../src/service/notifications.js';
import type { RequestContext } from '../../src/service/context.js';
import { parseScopes } from '../../src/security/scopes.js';

const ctx: RequestContext = {
  principal: { accessKeyId: 'AK', tenant: { id: 'alice' } as never, scope: parseScopes('admin') },
  requestId: 'r',
  remoteAddress: '127.0.0.1',
  audit: { action: 'x' },
  path: '/buckets/b',
  clock: () => 0,
};
const rule = {
  allowedOrigins: ['https://app.example'],
  allowedMethods: ['GET', 'PUT'],
  allowedHeaders: ['content-type'],
  exposeHeaders: ['etag'],
};
const plain = { id: 1, tenantId: 'alice', name: 'b' } as BucketRecord;
const withRules = { ...plain, cors: [rule] } as BucketRecord;

/** A commit that records what it was asked and answers `answer`. */
function recorder(answer: unknown): Pick<ObjectService, 'commit'> & { calls: unknown[][] } {
  const calls: unknown[][] = [];
  return {
    calls,
    commit: async <K extends TransactionalName>(
      _c: unknown,
      op: K,
      args: CommandArgs<K>,
      status: number,
    ) => {
      calls.push([op, args, status]);
      return answer as CommandResult<K>;
    },
  };
}

t.test('CORS rules', async (t) => {
  t.same(corsRulesOf(plain), [], 'none is an empty list');
  const put = recorder({ cors: [rule] });
  t.same(await putBucketCors(put, ctx, plain, { rules: [rule] }), [rule]);
  t.equal(put.calls[0]?.[0], 'putBucketCors');
  t.equal(put.calls[0]?.[2], 200);
  const refused = recorder({});
  await t.rejects(putBucketCors(refused, ctx, plain, { rules: [] }), { code: 'bad_request' });
  t.same(refused.calls, [], 'an invalid configuration never reaches the engine');
  const del = recorder({});
  await deleteBucketCors(del, ctx, plain);
  t.same(del.calls[0]?.slice(0, 1), ['deleteBucketCors']);

  t.same(corsHeadersFor(plain, 'https://app.example', 'GET'), {}, 'no rules, no headers');
  t.same(corsHeadersFor(withRules, undefined, 'GET'), { Vary: 'Origin' });
  t.same(corsHeadersFor(withRules, 'https://evil.example', 'GET'), { Vary: 'Origin' });
  const allowed = corsHeadersFor(withRules, 'https://app.example', 'PUT');
  t.equal(allowed['Access-Control-Allow-Origin'], 'https://app.example');
  t.equal(allowed['Vary'], 'Origin');
  t.same(corsHeadersFor(withRules, 'https://app.example', 'DELETE'), { Vary: 'Origin' });

  const ask = { origin: 'https://app.example', method: 'PUT', headers: ['content-type'] };
  t.equal(preflightCors(withRules, ask)['Access-Control-Allow-Origin'], 'https://app.example');
  t.throws(() => preflightCors(withRules, { ...ask, headers: ['x-other'] }), {
    code: 'forbidden',
  });
  t.throws(() => preflightCors(plain, ask), { code: 'forbidden' });
});

t.test('notification configs', async (t) => {
  const config = { id: 'c1', url: 'http://127.0.0.1:9/hook', events: ['object-created'] };
  const refused = recorder({});
  await t.rejects(putNotificationConfigs(refused, ctx, plain, { configs: [config] }, false), {
    code: 'bad_request',
  });
  t.same(refused.calls, [], 'a private target never reaches the engine');
  const view = { ...config, type: 'webhook', hasSecret: true };
  const put = recorder({
    configs: [view, { ...view, id: 'c0' }],
    secrets: { c1: 'whsec_new' },
  });
  const stored = await putNotificationConfigs(put, ctx, plain, { configs: [config] }, true);
  t.same(
    stored.map((c) => [c.id, c.signingSecret]),
    [
      ['c1', 'whsec_new'],
      ['c0', undefined],
    ],
    'a secret only for the new id',
  );
  t.equal(put.calls[0]?.[0], 'putBucketNotifications');
  await t.rejects(
    putNotificationConfigs(
      recorder({}),
      ctx,
      plain,
      { configs: [{ ...config, type: 'sns' }] },
      true,
    ),
    { code: 'not_implemented' },
  );
});

t.test('delivery status', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-service-notify-'));
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  t.same(deliveryStatus(store, 3), {
    pending: 0,
    delivered: 0,
    failedAttempts: 0,
    discarded: 0,
    targets: [],
  });
  const event = (id: string): Record<string, unknown> => ({ id, type: 'object-created' });
  store.transactSync(() => {
    store.put(DB.outboxStatus, bucketKeyPrefix(3), {
      bucketId: 3,
      tenantId: 'alice',
      bucket: 'b',
      pending: 3,
      delivered: 5,
      failedAttempts: 2,
      discarded: 1,
      lastError: 'HTTP 500',
      lastErrorAt: 1000,
    });
    const row = (configId: string, seq: number, extra: object = {}): void =>
      store.put(DB.outbox, outboxKey(3, configId, seq), {
        seq,
        tenantId: 'alice',
        bucketId: 3,
        configId,
        event: event(`e${seq}`),
        createdAt: seq,
        attempts: 0,
        nextAttemptAt: 10 * seq,
        ...extra,
      });
    row('a', 1, { attempts: 2, lastAttemptAt: 5, lastError: 'HTTP 500' });
    row('a', 2);
    row('b', 3);
    // Another bucket's queue is not this one's.
    store.put(DB.outbox, outboxKey(4, 'a', 4), { event: event('e4') });
  });
  const status = deliveryStatus(store, 3);
  t.match(status, { pending: 3, delivered: 5, failedAttempts: 2, discarded: 1, lastErrorAt: 1000 });
  t.equal(status.lastDeliveredAt, undefined);
  t.same(status.targets, [
    {
      configId: 'a',
      headEventId: 'e1',
      attempts: 2,
      nextAttemptAt: 10,
      lastAttemptAt: 5,
      lastError: 'HTTP 500',
    },
    { configId: 'b', headEventId: 'e3', attempts: 0, nextAttemptAt: 30 },
  ]);
});
