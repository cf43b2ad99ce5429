// Goal: a batch delete answers each key on its own: each is authorized for itself (a refused key
// fails only its entry), a malformed key is an entry's error, the engine's answer (version id,
// delete marker) is carried per entry, and a failure of the service reads `internal` and never
// its own message. The request's shape is refused whole (empty, too many, no key).
// Method: batchDelete with an engine and an authorizer of this test's own; parseBatchEntries.
import t from 'tap';
import type { BucketRecord } from '../../src/engine/index/schema.js';
import {
  batchDelete,
  parseBatchEntries,
  BATCH_DELETE_KEYS_MAX,
} from '../../src/service/batch-delete.js';
import type { RequestContext } from '../../src/service/context.js';
import { parseScopes } from '../../src/security/scopes.js';
import { Forbidden, Unavailable } from '../../src/util/errors.js';

const bucket = { id: 1, tenantId: 'alice', name: 'b' } as BucketRecord;
const ctx: RequestContext = {
  principal: { accessKeyId: 'AK', tenant: { id: 'alice' } as never, scope: parseScopes('delete') },
  requestId: 'r',
  remoteAddress: '127.0.0.1',
  audit: { action: 'batchDeleteObjects' },
  path: '/buckets/b/objects:batchDelete',
  clock: () => 0,
};

t.test('each entry is answered on its own', async (t) => {
  const calls: Record<string, unknown>[] = [];
  const engine = {
    call: async <T>(op: string, args: unknown): Promise<T> => {
      const fields = args as Record<string, unknown>;
      calls.push({ op, ...fields });
      if (fields['key'] === 'busy') throw Unavailable('the engine is busy');
      if (fields['key'] === 'broken') throw new TypeError('a bug with a secret in it');
      if (fields['versionId'] !== undefined) return { versionId: fields['versionId'] } as T;
      return { versionId: 'v-new', deleteMarker: true } as T;
    },
  };
  const authorized: string[] = [];
  const access = {
    bucket: (
      _principal: unknown,
      name: string,
      access: { verb: string; key?: string | undefined },
    ) => {
      authorized.push(`${access.verb}:${name}/${access.key ?? '-'}`);
      if (access.key === 'denied') throw Forbidden('the policy denies delete');
      return bucket;
    },
  };
  const result = await batchDelete({ engine, access }, ctx, bucket, [
    { key: 'plain' },
    { key: 'old', versionId: 'v1' },
    { key: 'denied' },
    { key: '' },
    { key: 'busy', versionId: 'v2' },
    { key: 'broken' },
  ]);
  t.same(result.deleted, [
    { key: 'plain', versionId: 'v-new', deleteMarker: true },
    { key: 'old', versionId: 'v1' },
  ]);
  t.same(
    result.errors.map((e) => [e.key, e.versionId, e.code]),
    [
      ['denied', undefined, 'forbidden'],
      ['', undefined, 'bad_request'],
      ['busy', 'v2', 'unavailable'],
      ['broken', undefined, 'internal'],
    ],
  );
  t.notMatch(result.errors[3]?.message, /secret/, "a bug's message stays in the log");
  t.same(authorized, [
    'delete:b/plain',
    'delete:b/old',
    'delete:b/denied',
    'delete:b/busy',
    'delete:b/broken',
  ]);
  t.same(
    calls.map((c) => [c['op'], c['key'], c['caller'], c['tenantId']]),
    [
      ['deleteObject', 'plain', 'AK', 'alice'],
      ['deleteObject', 'old', 'AK', 'alice'],
      ['deleteObject', 'busy', 'AK', 'alice'],
      ['deleteObject', 'broken', 'AK', 'alice'],
    ],
    'refused keys never reach the engine',
  );
});

t.test('the request shape', async (t) => {
  t.same(parseBatchEntries([{ key: 'a' }, { key: 'b', versionId: 'v' }]), [
    { key: 'a' },
    { key: 'b', versionId: 'v' },
  ]);
  const many = Array.from({ length: BATCH_DELETE_KEYS_MAX + 1 }, (_, i) => ({ key: `k${i}` }));
  for (const [bad, what] of [
    [[], 'empty'],
    [{}, 'not an array'],
    [many, 'too many'],
    [[{ versionId: 'v' }], 'no key'],
    [[{ key: 'a', versionId: 1 }], 'a version id that is not a string'],
    [[null], 'an entry that is not an object'],
  ] as const)
    t.throws(() => parseBatchEntries(bad), { code: 'bad_request' }, what);
});
