// Goal: a gateway reports the segments its unfinished uploads hold whenever a hold adds one the
// engine was not last told of (once per event-loop turn, however many holds), and again on every
// new engine connection, since a restarted engine or a link made again knows none of them;
// releases go with the next report or the interval's tick, never as a report of their own.
// Method: UploadPins over a fake engine client that records its calls and can announce a
// connection.
import t from 'tap';
import { setImmediate as turn } from 'node:timers/promises';
import { UploadPins } from '../../src/service/upload-pins.js';
import type { EngineClient } from '../../src/engine/protocol.js';
import { componentLogger } from '../../src/util/log.js';

t.test('pins are reported on change and after a reconnect', async (t) => {
  const reports: number[][] = [];
  const connected: Array<() => void> = [];
  const engine = {
    call: (op: string, args: { segments: number[] }) => {
      t.equal(op, 'pinSegments');
      reports.push([...args.segments].sort((a, b) => a - b));
      return Promise.resolve(null);
    },
    onConnected: (listener: () => void) => connected.push(listener),
  } as unknown as EngineClient;
  const pins = new UploadPins(engine, componentLogger('test'));
  t.teardown(() => pins.close());

  pins.hold(3);
  pins.hold(3);
  pins.hold(5);
  await turn();
  t.same(reports, [[3, 5]], 'three holds in one turn: one report of the set');
  pins.release(3);
  await turn();
  t.same(reports, [[3, 5]], 'segment 3 is still held by the second upload');
  pins.release(3);
  await turn();
  t.equal(reports.length, 1, 'a release is not reported on its own');
  pins.tick();
  t.same(reports.at(-1), [5], 'the tick reports the set without it');
  for (const listener of connected) listener();
  await turn();
  t.same(reports.at(-1), [5], 'a new connection gets the set again');
  t.equal(reports.length, 3);
  pins.release(5);
  pins.hold(5);
  await turn();
  t.equal(reports.length, 3, 'held again before any report: the engine still has it');
  pins.release(5);
  pins.tick();
  t.same(reports.at(-1), [], 'nothing held: the empty set, so the engine drops them');
  pins.tick();
  pins.release(5);
  await turn();
  t.equal(reports.length, 4, 'nothing stale, nothing held: no report');
  pins.hold(7);
  await turn();
  t.same(reports.at(-1), [7], 'a segment the engine was not told of is reported at once');
});

t.test('a failed report is made again by the next hold', async (t) => {
  const reports: number[][] = [];
  let fail = true;
  const engine = {
    call: (_op: string, args: { segments: number[] }) => {
      reports.push([...args.segments]);
      return fail ? Promise.reject(new Error('engine away')) : Promise.resolve(null);
    },
    onConnected: () => undefined,
  } as unknown as EngineClient;
  const pins = new UploadPins(engine, componentLogger('test'));
  t.teardown(() => pins.close());
  pins.hold(2);
  await turn();
  await turn();
  fail = false;
  pins.release(2);
  pins.hold(2);
  await turn();
  t.same(reports, [[2], [2]], 'the engine never took the first: the hold reports it again');
});
