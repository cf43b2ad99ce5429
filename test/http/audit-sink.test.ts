// Goal: a listener's audit sink sends the rows of one event-loop turn in the next, keeps at most
// 8 batches unanswered (the rest wait in its bounded buffer, which says `full` at 100,000 rows,
// when the listener refuses requests, and drops none, also while the engine does not answer at
// all), puts the rows of a batch the engine could not be reached for, or answered 503, back and
// sends them again (also after `close`), drops a row the engine answered with another error three
// times (it would hold back every later row), and `settle` resolves once every row before it
// is committed, or after 2 s when the engine does not answer. It announces itself to the engine
// as an audit source and, asked by a barrier, sends the rows it holds before its answer.
// Method: the sink over a stand-in engine client whose answers the test releases or refuses;
// a retry is awaited as the call it makes, never as a fixed pause.
import t, { type Test } from 'tap';
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { AuditSink } from '../../src/http/audit.js';
import type { EngineClient } from '../../src/engine/protocol.js';
import type { Exchange } from '../../src/http/exchange.js';
import type { AuditInput } from '../../src/engine/ops/audit.js';
import { componentLogger } from '../../src/util/log.js';
import { BadRequest, DiskFull, EngineUnavailable } from '../../src/util/errors.js';

interface Call {
  events: AuditInput[];
  answer: () => void;
  /** The connection to the engine is lost. */
  unreachable: () => void;
  /** The engine answers with an error. */
  refuse: () => void;
  /** The engine answers that the disk is full (503). */
  diskFull: () => void;
}

/**
 * An engine client that holds every appendAudit call until the test answers it, and every audit
 * barrier as an appendAudit without rows. `sent` lists every command in order; `push` plays a
 * push frame from the engine.
 */
function heldEngine(): {
  engine: EngineClient;
  calls: Call[];
  sent: Array<{ op: string; args: unknown }>;
  push: (name: string, args: unknown) => void;
} {
  const calls: Call[] = [];
  const sent: Array<{ op: string; args: unknown }> = [];
  const pushHandlers = new Map<string, (args: unknown) => void>();
  const engine = {
    onConnected: () => undefined,
    onPush: (name: string, handler: (args: unknown) => void) => pushHandlers.set(name, handler),
    call(op: string, args: { events: AuditInput[] }): Promise<unknown> {
      sent.push({ op, args });
      if (op === 'auditSource' || op === 'auditFlushed') return Promise.resolve(null);
      if (op === 'auditBarrier') args = { events: [] };
      else if (op !== 'appendAudit') throw new TypeError(`unexpected command ${op}`);
      return new Promise((resolve, reject) => {
        calls.push({
          events: args.events,
          answer: () => resolve({ written: args.events.length }),
          unreachable: () => reject(EngineUnavailable('lost the connection to the engine')),
          refuse: () => reject(BadRequest('Key size is larger than the maximum key size')),
          diskFull: () => reject(DiskFull('no room on the data filesystem for the index commit')),
        });
      });
    },
  } as unknown as EngineClient;
  return { engine, calls, sent, push: (name, args) => pushHandlers.get(name)?.(args) };
}

let requests = 0;
function answered(): Exchange {
  requests += 1;
  return {
    audit: { action: 'getObject', actor: 'AK1' },
    requestId: `r${requests}`,
    path: '/buckets/b/objects/k',
    remoteAddress: '127.0.0.1',
    status: 200,
  } as unknown as Exchange;
}

const log = componentLogger('test.audit');

/** Resolves once the held engine has had `count` calls (the sink's retry timer sends them). */
async function untilCalls(calls: readonly Call[], count: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (calls.length < count) {
    if (Date.now() > deadline)
      assert.fail(`waited 10 s for the sink's call ${count}; ${calls.length} came`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A sink over a held engine, closed (every call answered) when the test ends. */
function heldSink(t: Test): { sink: AuditSink } & ReturnType<typeof heldEngine> {
  const held = heldEngine();
  const { engine, calls } = held;
  const sink = new AuditSink(engine, log);
  t.teardown(() => {
    for (const call of calls) call.answer();
    return sink.close();
  });
  return { sink, ...held };
}

t.test('one batch per turn, at most 8 unanswered, the rest kept until full', async (t) => {
  const { sink, calls } = heldSink(t);
  sink.record(answered());
  sink.record(answered());
  t.equal(calls.length, 0, 'nothing is sent in the turn of the responses');
  await nextTurn();
  t.equal(calls.length, 1, 'one command in the next turn');
  t.equal(calls[0]?.events.length, 2, 'with both rows');
  for (let turn = 0; turn < 20; turn += 1) {
    sink.record(answered());
    await nextTurn();
  }
  t.equal(calls.length, 8, 'no more than 8 commands wait for the engine');
  calls[0]?.answer();
  await nextTurn();
  await nextTurn();
  t.equal(calls.length, 9, 'an answer frees a send, which takes what waited');
  t.equal(calls[8]?.events.length, 13, 'the rows of the turns that waited, in one batch');
  // At 100,000 rows held the sink is full (the listener refuses new requests), and drops none.
  for (let row = 0; row < 99_990; row += 1) sink.record(answered());
  t.notOk(sink.full, 'not full under 100,000 rows');
  for (let row = 0; row < 20; row += 1) sink.record(answered());
  t.ok(sink.full, 'full at 100,000 rows');
  await nextTurn();
  t.equal(calls.length, 9, 'still nothing more sent');
  // Answer until nothing more comes: 50 batches of 2,000, 8 at a time.
  for (let answeredUpTo = 1; answeredUpTo < calls.length;) {
    const waiting = calls.slice(answeredUpTo);
    answeredUpTo = calls.length;
    for (const call of waiting) call.answer();
    await nextTurn();
    await nextTurn();
  }
  const resent = calls.slice(9).reduce((sum, call) => sum + call.events.length, 0);
  t.equal(resent, 100_010, 'every row is sent once the engine answers; none was dropped');
  t.notOk(sink.full, 'no longer full');
  t.ok(
    calls.slice(9).every((call) => call.events.length <= 2000),
    'in batches of 2,000 at most',
  );
});

t.test('a batch the engine was not reached for is sent again by the retry timer', async (t) => {
  const { sink, calls } = heldSink(t);
  sink.record(answered());
  await nextTurn();
  const first = calls[0];
  first?.unreachable();
  await nextTurn();
  sink.record(answered());
  await nextTurn();
  t.equal(calls.length, 1, 'after a failure, new rows wait for the retry');
  await untilCalls(calls, 2);
  t.equal(calls.length, 2, 'the retry timer sends');
  t.same(
    calls[1]?.events.map((event) => event.requestId),
    [first?.events[0]?.requestId, `r${requests}`],
    'the refused row first, then the new one',
  );
});

t.test('rows the engine answered 503 (a full disk) are kept until it takes them', async (t) => {
  const { sink, calls } = heldSink(t);
  sink.record(answered());
  const row = `r${requests}`;
  await nextTurn();
  for (let attempt = 0; attempt < 5; attempt += 1) {
    t.same(
      calls[attempt]?.events.map((event) => event.requestId),
      [row],
      `attempt ${attempt + 1}`,
    );
    calls[attempt]?.diskFull();
    await untilCalls(calls, attempt + 2);
  }
  t.equal(calls.length, 6, 'sent again after every refusal for lack of space');
  calls[5]?.answer();
});

t.test('a graceful stop goes on sending what the engine did not take at once', async (t) => {
  const { engine, calls } = heldEngine();
  const sink = new AuditSink(engine, log);
  for (let row = 0; row < 3; row += 1) sink.record(answered());
  const closed = sink.close();
  await nextTurn();
  t.equal(calls.length, 1, 'the rows go at close');
  for (let attempt = 0; attempt < 3; attempt += 1) {
    calls[attempt]?.unreachable();
    await untilCalls(calls, attempt + 2);
    t.equal(
      calls.length,
      attempt + 2,
      `again once the engine could not be reached (${attempt + 1})`,
    );
    t.equal(calls[attempt + 1]?.events.length, 3, 'all of them');
  }
  calls[3]?.answer();
  await closed;
  t.pass('close resolves once the engine took them');
});

t.test('a row the engine refused three times is dropped; later rows go on', async (t) => {
  const { sink, calls } = heldSink(t);
  sink.record(answered());
  const refused = `r${requests}`;
  await nextTurn();
  for (let attempt = 0; attempt < 3; attempt += 1) {
    t.same(
      calls[attempt]?.events.map((event) => event.requestId),
      [refused],
      `attempt ${attempt + 1}`,
    );
    calls[attempt]?.refuse();
    // After the third refusal no call may come: give the retry timer its chance to be wrong.
    if (attempt < 2) await untilCalls(calls, attempt + 2);
    else await new Promise((resolve) => setTimeout(resolve, 80));
  }
  t.equal(calls.length, 3, 'not sent a fourth time');
  sink.record(answered());
  await untilCalls(calls, 4);
  t.same(
    calls[3]?.events.map((event) => event.requestId),
    [`r${requests}`],
    'the next row goes alone',
  );
});

t.test('settle waits for the rows before it and a barrier, or gives up', async (t) => {
  const { sink, calls } = heldSink(t);
  sink.record(answered());
  let settled = false;
  const settling = sink.settle().then(() => (settled = true));
  await nextTurn();
  t.same(
    calls.map((call) => call.events.length),
    [1, 0],
    'the row, then the audit barrier',
  );
  calls[0]?.answer();
  await nextTurn();
  t.notOk(settled, 'not before the barrier is committed');
  calls[1]?.answer();
  await settling;
  t.ok(settled, 'settled once both are answered');
  const started = Date.now();
  await sink.settle(); // no answer this time
  t.ok(Date.now() - started >= 1900, 'an engine that does not answer is waited for 2 s at most');
});

t.test('an audit source: announced, and flushed before it answers a barrier', async (t) => {
  const { sink, sent, push } = heldSink(t);
  t.same(sent, [{ op: 'auditSource', args: {} }], 'announced to the engine at once');
  sink.record(answered());
  sink.record(answered());
  push('flushAudit', { barrier: 7 });
  t.same(
    sent
      .slice(1)
      .map(({ op, args }) =>
        op === 'appendAudit' ? (args as { events: AuditInput[] }).events.length : [op, args],
      ),
    [2, ['auditFlushed', { barrier: 7 }]],
    'in the turn of the push: both rows, then the answer naming the barrier',
  );
  push('flushAudit', { barrier: 8 });
  t.same(sent.at(-1), { op: 'auditFlushed', args: { barrier: 8 } }, 'answered with no rows too');
  t.equal(sent.length, 4, 'with no empty batch before it');
});

t.test('a barrier also sends the rows that waited for a free send', async (t) => {
  const { sink, calls, sent, push } = heldSink(t);
  for (let turn = 0; turn < 8; turn += 1) {
    sink.record(answered());
    await nextTurn();
  }
  t.equal(calls.length, 8, '8 commands wait for the engine');
  sink.record(answered());
  sink.record(answered());
  push('flushAudit', { barrier: 3 });
  await nextTurn();
  t.notOk(
    sent.some(({ op }) => op === 'auditFlushed'),
    'no answer while two rows still wait for a free send',
  );
  calls[0]?.answer();
  await nextTurn();
  await nextTurn();
  t.same(
    sent
      .slice(-2)
      .map(({ op, args }) =>
        op === 'appendAudit' ? (args as { events: AuditInput[] }).events.length : [op, args],
      ),
    [2, ['auditFlushed', { barrier: 3 }]],
    'a freed send takes them, and the answer follows',
  );
});
