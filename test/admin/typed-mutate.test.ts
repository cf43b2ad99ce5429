// Goal: the admin API's audited mutations (`mutate`, src/admin/request.ts) are typed by the
// engine's command map: the command's name picks the arguments `mutate` takes and the result it
// answers, so a mistyped or missing field, a read command or a result read as another type fails
// to compile; at run time, `mutate` sends its arguments without the fields left undefined, plus
// the audit row, with the typed `call` (never `callUnchecked`), and marks the request's audit row
// written; a refused mutation does not.
// Method: the calls in `typedMutations` are compiled with the tests, never run; each
// `@ts-expect-error` fails the build if its line ever compiles. The run-time checks drive
// `mutate` over a recording engine client.
import t from 'tap';
import type { EngineClient } from '../../src/engine/protocol.js';
import type { Exchange } from '../../src/http/exchange.js';
import { mutate, type AdminServices } from '../../src/admin/request.js';
import { Conflict } from '../../src/util/errors.js';

/** Never called: only compiled. Answers what it read, so that nothing is unused. */
export async function typedMutations(
  services: AdminServices,
  exchange: Exchange,
): Promise<unknown[]> {
  const read: unknown[] = [];
  const tenant = await mutate(services, exchange, 'createTenant', { id: 't', name: 'T' }, 201);
  read.push(tenant.id);
  // An optional field may be left undefined (a body field not given).
  const optional: string | undefined = undefined;
  read.push(await mutate(services, exchange, 'createTenant', { id: 't', name: optional }, 201));
  // @ts-expect-error: createTenant answers the tenant, which has no `keysRevoked`
  read.push(tenant.keysRevoked);
  const noKeyId = { tenantId: 't', accessKeyId: optional, reason: 'r' };
  // @ts-expect-error: a required field may not be undefined (revokeAccessKey needs its key id)
  await mutate(services, exchange, 'revokeAccessKey', noKeyId, 200);
  const misnamed = { tenantId: 't', account: 'a', scopes: 'read' };
  // @ts-expect-error: createAccessKey names its account `accountId`
  await mutate(services, exchange, 'createAccessKey', misnamed, 201);
  // @ts-expect-error: a read command commits nothing and carries no audit row
  await mutate(services, exchange, 'scrubTenantChunks', { tenantId: 't', verify: false }, 200);
  const disabled = await mutate(
    services,
    exchange,
    'disableTenant',
    { tenantId: 't', reason: 'r' },
    200,
  );
  read.push(disabled.keysRevoked);
  return read;
}

/** An engine client whose `call` records its command and answers `answer` (or fails with it). */
function recordingServices(answer: () => Promise<unknown>): {
  services: AdminServices;
  calls: Array<[string, Record<string, unknown>]>;
} {
  const calls: Array<[string, Record<string, unknown>]> = [];
  const engine = {
    call: (op: string, args: Record<string, unknown>) => {
      calls.push([op, args]);
      return answer();
    },
    callUnchecked: () => Promise.reject(new TypeError('the admin API sends typed commands')),
  } as unknown as EngineClient;
  return { services: { engine } as unknown as AdminServices, calls };
}

function exchangeOf(): Exchange {
  return {
    requestId: 'r1',
    remoteAddress: '127.0.0.1',
    path: '/admin/api/v1/tenants',
    audit: { action: 'createTenant', actor: 'operator' },
  } as unknown as Exchange;
}

t.test('a mutation sends its defined arguments and the audit row', async (t) => {
  const { services, calls } = recordingServices(() => Promise.resolve({ id: 'acme' }));
  const exchange = exchangeOf();
  const args = { id: 'acme', name: undefined, dryRun: false };
  const tenant = await mutate(services, exchange, 'createTenant', args, 201);
  t.equal(tenant.id, 'acme', 'the engine answer is the result');
  t.equal(calls.length, 1);
  const [op, sent] = calls[0] ?? ['', {}];
  t.equal(op, 'createTenant');
  t.same(Object.keys(sent).sort(), ['audit', 'dryRun', 'id'], 'the undefined name is left out');
  t.match(sent, { id: 'acme', dryRun: false });
  t.match(sent['audit'], {
    requestId: 'r1',
    actor: 'operator',
    action: 'createTenant',
    status: 201,
  });
  t.equal(exchange.audit.written, true, 'the row is written with the mutation');
  t.same(args, { id: 'acme', name: undefined, dryRun: false }, "the caller's object is kept");
});

t.test('a refused mutation writes no row', async (t) => {
  const { services } = recordingServices(() => Promise.reject(Conflict('taken')));
  const exchange = exchangeOf();
  await t.rejects(mutate(services, exchange, 'createTenant', { id: 'acme' }, 201), {
    code: 'conflict',
  });
  t.notOk(exchange.audit.written, 'the listener writes the refusal row itself');
});
