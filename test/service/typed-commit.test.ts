// Goal: the data plane's audited mutations are typed by the engine's command map: the command's
// name picks the arguments `ObjectService.commit` and `commitBucketChange` take and the result
// they answer, so a mistyped field, a read command or a result read as another type fails to
// compile; at run time, a commit sends exactly its arguments plus the caller and the audit row,
// with the typed `call`, and marks the request's audit row written; a refused commit does not.
// Method: the calls in `typedCommits` are compiled with the tests, never run; each
// `@ts-expect-error` fails the build if its line ever compiles. The run-time checks drive an
// ObjectService over a recording engine client.
import t from 'tap';
import type { BucketRecord } from '../../src/engine/index/schema.js';
import type { EngineClient } from '../../src/engine/protocol.js';
import type { RequestContext } from '../../src/service/context.js';
import {
  commitBucketChange,
  ObjectService,
  type ObjectServiceDeps,
} from '../../src/service/objects.js';
import { parseScopes } from '../../src/security/scopes.js';
import { Conflict } from '../../src/util/errors.js';

/** Never called: only compiled. Answers what it read, so that nothing is unused. */
export async function typedCommits(
  objects: ObjectService,
  ctx: RequestContext,
  bucket: BucketRecord,
): Promise<unknown[]> {
  const read: unknown[] = [];
  const args = { tenantId: 't', bucket: 'b', status: 'Enabled' };
  const changed = await objects.commit(ctx, 'setVersioning', args, 200);
  read.push(changed.versioning);
  // @ts-expect-error: putObjectTags takes the tags
  await objects.commit(ctx, 'putObjectTags', { tenantId: 't', bucket: 'b', key: 'k' }, 200);
  // @ts-expect-error: a read command commits nothing and carries no audit row
  await objects.commit(ctx, 'scrubTenantChunks', { tenantId: 't', verify: false }, 200);
  const tagged = await objects.commit(
    ctx,
    'putObjectTags',
    { tenantId: 't', bucket: 'b', key: 'k', tags: [] },
    200,
  );
  read.push(tagged.versionId);
  // @ts-expect-error: putObjectTags answers the version, which has no `versioning`
  read.push(tagged.versioning);
  const cors = await commitBucketChange(objects, ctx, bucket, 'putBucketCors', { cors: {} }, 200);
  read.push(cors.cors);
  // @ts-expect-error: putBucketCors's field is `cors`
  await commitBucketChange(objects, ctx, bucket, 'putBucketCors', { rules: [] }, 200);
  return read;
}

function contextOf(actor?: string): RequestContext {
  return {
    principal: { accessKeyId: 'AK', tenant: { id: 'alice' } as never, scope: parseScopes('admin') },
    requestId: 'r1',
    remoteAddress: '127.0.0.1',
    audit: { action: 'setVersioning', ...(actor === undefined ? {} : { actor }) },
    path: '/buckets/b/versioning',
    clock: () => 0,
  };
}

/** An engine client whose `call` records its command and answers `answer` (or fails with it). */
function recordingEngine(answer: () => Promise<unknown>): {
  engine: EngineClient;
  calls: Array<[string, Record<string, unknown>]>;
} {
  const calls: Array<[string, Record<string, unknown>]> = [];
  const engine = {
    call: (op: string, args: Record<string, unknown>) => {
      calls.push([op, args]);
      return answer();
    },
    callUnchecked: () => Promise.reject(new TypeError('the data plane sends typed commands')),
  } as unknown as EngineClient;
  return { engine, calls };
}

function serviceOver(engine: EngineClient): ObjectService {
  return new ObjectService({ engine } as unknown as ObjectServiceDeps);
}

t.test('a commit sends its arguments, the caller and the audit row', async (t) => {
  const bucket = { id: 1, tenantId: 'alice', name: 'b', versioning: 'Enabled' };
  const { engine, calls } = recordingEngine(() => Promise.resolve(bucket));
  const ctx = contextOf('AK');
  const args = { tenantId: 'alice', bucket: 'b', status: 'Enabled' };
  const answer = await serviceOver(engine).commit(ctx, 'setVersioning', args, 200);
  t.equal(answer.versioning, 'Enabled', 'the engine answer is the result');
  t.equal(calls.length, 1);
  const [op, sent] = calls[0] ?? ['', {}];
  t.equal(op, 'setVersioning');
  t.match(sent, { tenantId: 'alice', bucket: 'b', status: 'Enabled', caller: 'AK' });
  t.match(sent['audit'], {
    requestId: 'r1',
    actor: 'AK',
    action: 'setVersioning',
    status: 200,
    outcome: 'allowed',
  });
  t.equal(ctx.audit.written, true, 'the row is written with the commit');
});

t.test('an anonymous commit names no caller; a refused one writes no row', async (t) => {
  const { engine, calls } = recordingEngine(() => Promise.reject(Conflict('taken')));
  const ctx = contextOf();
  const objects = serviceOver(engine);
  await t.rejects(
    commitBucketChange(objects, ctx, { name: 'b' } as BucketRecord, 'deleteBucketCors', {}, 204),
    { code: 'conflict' },
  );
  const [op, sent] = calls[0] ?? ['', {}];
  t.equal(op, 'deleteBucketCors');
  t.same(Object.keys(sent).sort(), ['audit', 'bucket', 'tenantId']);
  t.equal(ctx.audit.written, undefined, 'a refused commit leaves its row to the transport');
});
