// Goal: a sink with one command unanswered at most (a gateway listener's) sends a lone row in the
// next turn (after its send delay, with the rows recorded meanwhile, when it has one), gathers the rows of every turn while its command waits into one command sent on the
// answer, keeps that one batch after a lost connection and sends it again, and still answers a
// barrier after the rows it held.
// Method: the sink over a stand-in engine client whose appendAudit answers the test releases.
import t from 'tap';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { AuditSink } from '../../src/http/audit.js';
import type { EngineClient } from '../../src/engine/protocol.js';
import type { Exchange } from '../../src/http/exchange.js';
import type { AuditInput } from '../../src/engine/ops/audit.js';
import { componentLogger } from '../../src/util/log.js';
import { EngineUnavailable } from '../../src/util/errors.js';

interface Call {
  readonly op: string;
  readonly events: AuditInput[];
  answer(): void;
  unreachable(): void;
}

function clockedSink(sendDelayMs = 0): {
  sink: AuditSink;
  calls: Call[];
  push: (name: string, args: unknown) => void;
} {
  const calls: Call[] = [];
  const handlers = new Map<string, (args: unknown) => void>();
  const engine = {
    onConnected: () => undefined,
    onPush: (name: string, handler: (args: unknown) => void) => handlers.set(name, handler),
    call(op: string, args: { events?: AuditInput[] }): Promise<unknown> {
      if (op === 'auditSource') return Promise.resolve(null);
      return new Promise((resolve, reject) => {
        calls.push({
          op,
          events: args.events ?? [],
          answer: () => resolve(null),
          unreachable: () => reject(EngineUnavailable('lost the connection to the engine')),
        });
      });
    },
  } as unknown as EngineClient;
  const sink = new AuditSink(engine, componentLogger('test.audit'), {
    sendsInFlightMax: 1,
    retryIntervalMs: 5,
    sendDelayMs,
  });
  return { sink, calls, push: (name, args) => handlers.get(name)?.(args) };
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

const rowsOf = (calls: Call[]): number =>
  calls.filter((call) => call.op === 'appendAudit').reduce((n, c) => n + c.events.length, 0);

t.test('rows of the turns while a command waits go in one command on its answer', async (t) => {
  const { sink, calls } = clockedSink();
  sink.record(answered());
  await nextTurn();
  t.equal(calls.length, 1, 'a lone row goes in the next turn');
  for (let turn = 0; turn < 5; turn += 1) {
    sink.record(answered());
    sink.record(answered());
    await nextTurn();
  }
  t.equal(calls.length, 1, 'nothing more while the command waits');
  calls[0]?.answer();
  await nextTurn();
  await nextTurn();
  t.equal(calls.length, 2, 'the answer sends what waited');
  t.equal(calls[1]?.events.length, 10, 'the rows of five turns in one command');
  calls[1]?.unreachable();
  await nextTurn();
  await nextTurn();
  await new Promise((resolve) => setTimeout(resolve, 20)); // past the 5 ms retry interval
  t.equal(calls.length, 3, 'sent again after the retry interval');
  t.equal(calls[2]?.events.length, 10, 'the same rows, none dropped');
  calls[2]?.answer();
  t.equal(rowsOf(calls.slice(0, 1)) + rowsOf(calls.slice(2)), 11, 'every row once, answered');
  await sink.close();
});

t.test('a barrier is answered after the rows held, one command at a time', async (t) => {
  const { sink, calls, push } = clockedSink();
  sink.record(answered());
  await nextTurn();
  sink.record(answered());
  push('flushAudit', { barrier: 3 });
  await nextTurn();
  t.same(
    calls.map((call) => call.op),
    ['appendAudit'],
    'the barrier waits for the first command',
  );
  calls[0]?.answer();
  for (let turn = 0; turn < 4 && calls.length < 2; turn += 1) await nextTurn();
  t.equal(calls[1]?.op, 'appendAudit', 'then the row held');
  calls[1]?.answer();
  for (let turn = 0; turn < 4 && calls.length < 3; turn += 1) await nextTurn();
  t.equal(calls[2]?.op, 'auditFlushed', 'then the answer to the barrier');
  calls[2]?.answer();
  await sink.close();
});

t.test('a send delay gathers the rows of many turns; a barrier sends them at once', async (t) => {
  // A delay no test waits out: only the barrier can send the rows.
  const { sink, calls, push } = clockedSink(60_000);
  for (let turn = 0; turn < 5; turn += 1) {
    sink.record(answered());
    await nextTurn();
  }
  t.equal(calls.length, 0, 'nothing sent before the delay');
  push('flushAudit', { barrier: 4 });
  await nextTurn();
  t.same(
    calls.map((call) => call.op),
    ['appendAudit', 'auditFlushed'],
    'the barrier sends what is held, then its answer on the same connection',
  );
  t.equal(calls[0]?.events.length, 5, 'the rows of five turns in one command');
  for (const call of calls) call.answer();
  await sink.close();
});
