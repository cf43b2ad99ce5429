// Goal: an audit barrier passes once every audit source has sent the rows it held: it asks each
// source (a push frame naming the barrier), waits for each one's answer, does not wait for a
// source that has gone, and gives up on (and reports) one that does not answer after the wait
// limit. Against the real engine, a row a listener's sink recorded a moment before another
// process's audit query is committed when that query's `settle` resolves, though the listener
// had not sent it, also after the engine restarted.
// Method: AuditBarriers with stand-in sources; then the engine started in this process, with two
// audit sinks on connections of their own (one listener's, whose own sends and retries are held
// back for a minute, one standing in for the admin process) and a bare connection that announces
// itself as a source and never answers.
import t from 'tap';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { AuditBarriers } from '../../src/engine/audit-barrier.js';
import { startEngine } from '../../src/engine/engine.js';
import { EngineClient, encodeFrame } from '../../src/engine/protocol.js';
import { AuditSink } from '../../src/http/audit.js';
import type { Exchange } from '../../src/http/exchange.js';
import { DB } from '../../src/engine/index/schema.js';
import { loadSettings } from '../../src/util/config.js';
import { componentLogger } from '../../src/util/log.js';
import { tempDir, settle } from './segment-testing.js';

/** A stand-in source: the push frames it was sent. */
function source(): { pushed: object[]; push: (message: object) => void } {
  const pushed: object[] = [];
  return { pushed, push: (message) => pushed.push(message) };
}

/** Whether `promise` has resolved by the next macrotask. */
async function resolvedSoon(promise: Promise<void>): Promise<boolean> {
  let resolved = false;
  void promise.then(() => (resolved = true));
  await settle(5);
  return resolved;
}

t.test('a barrier waits for every source, or its leaving, or the limit', async (t) => {
  const unanswered: number[] = [];
  const barriers = new AuditBarriers({
    waitMaxMs: 200,
    unanswered: (sources) => unanswered.push(sources),
  });
  t.ok(await resolvedSoon(barriers.pass()), 'no sources: passes at once');

  const a = source();
  const b = source();
  barriers.add(a, a.push);
  barriers.add(b, b.push);
  barriers.add(a, a.push); // announced again after a reconnect
  const first = barriers.pass();
  t.same(a.pushed, [{ p: 'flushAudit', a: { barrier: 1 } }], 'each source asked once');
  t.same(b.pushed, [{ p: 'flushAudit', a: { barrier: 1 } }]);
  barriers.flushed(a, 1);
  barriers.flushed(a, 99); // no such barrier: ignored
  t.notOk(await resolvedSoon(first), 'not while one source has not answered');
  barriers.flushed(b, 1);
  t.ok(await resolvedSoon(first), 'passes once both have');

  const second = barriers.pass();
  barriers.flushed(a, 2);
  barriers.drop(b);
  t.ok(await resolvedSoon(second), 'a source that has gone is not waited for');
  const started = Date.now();
  await barriers.pass(); // a never answers
  t.ok(Date.now() - started >= 190, 'a source that does not answer is waited for at most 200 ms');
  t.same(unanswered, [1], 'and reported');
  t.equal(b.pushed.length, 2, 'a source that has gone is not asked again');
});

let requests = 0;
function answered(): Exchange {
  requests += 1;
  return {
    audit: { action: 'listBuckets', actor: 'AK1' },
    requestId: `barrier-${requests}`,
    path: '/buckets',
    remoteAddress: '127.0.0.1',
    status: 200,
  } as unknown as Exchange;
}

t.test('the real engine: a query finds the rows a listener had not sent yet', async (t) => {
  const dataDir = tempDir(t, 'lw-audit-barrier-');
  const settings = loadSettings({ flags: { data_dir: dataDir } });
  let engine = await startEngine({ dataDir, settings });
  t.teardown(() => engine.stop());
  const log = componentLogger('test.audit');
  const socketPath = join(dataDir, 'engine.sock');
  const clients = [new EngineClient(socketPath, 5000), new EngineClient(socketPath, 5000)];
  t.teardown(() => clients.forEach((client) => client.close()));
  const [listenerClient, adminClient] = clients as [EngineClient, EngineClient];
  await Promise.all(clients.map((client) => client.call('ping', {})));
  // A listener whose own sends come long after any query: only the barrier sends its rows.
  const listener = new AuditSink(listenerClient, log, {
    sendDelayMs: 60_000,
    retryIntervalMs: 60_000,
  });
  const admin = new AuditSink(adminClient, log);
  t.teardown(() => Promise.all([listener.close(), admin.close()]));
  await settle(20); // both announced

  const rows = (): Set<string> =>
    new Set(
      [...engine.store.range<{ requestId: string }>(DB.audit, {})].map(
        (entry) => entry.value.requestId,
      ),
    );
  for (let round = 0; round < 20; round += 1) {
    const exchange = answered();
    listener.record(exchange);
    await admin.settle();
    engine.store.refresh();
    t.ok(rows().has(exchange.requestId), `round ${round}: the row is committed`);
  }

  // A restarted engine knows no sources until they connect again, and announce themselves.
  await engine.stop();
  engine = await startEngine({ dataDir, settings });
  await Promise.all(clients.map((client) => client.call('ping', {})));
  await settle(20);
  const afterRestart = answered();
  listener.record(afterRestart);
  await admin.settle();
  engine.store.refresh();
  t.ok(rows().has(afterRestart.requestId), 'after a restart of the engine too');

  // A connection that announces itself as a source and then never answers a push.
  const silent = createConnection(socketPath);
  t.teardown(() => silent.destroy());
  await new Promise((resolve) => silent.once('connect', resolve));
  silent.write(encodeFrame({ i: 1, o: 'auditSource', a: {} }));
  silent.resume();
  await settle(20);
  let started = Date.now();
  await admin.settle();
  const waited = Date.now() - started;
  // At least its 1 s; that it gives up at all is shown by the query returning.
  t.ok(waited >= 900, `a silent source holds a query 1 s (${waited} ms)`);
  silent.destroy();
  await settle(20);
  started = Date.now();
  await admin.settle();
  t.ok(Date.now() - started < 900, 'not once its connection has closed');
});
