// Goal: hinted handoff (src/cluster/hints.ts): a replicated write a replica missed after its
// majority answered is sent again, in order, with backoff, until it lands; a target no longer a
// storage member has its hints dropped; hints beyond the bounds (by count and by the memory they
// hold) and hints refused too often are left to a repair scan of their tenants, run once the
// target takes sends again, and run again while it fails.
// Method: a `Hints` whose timers are fired here by hand and whose sends are functions of the test
// that fail while the target is "down"; no etcd, no cluster.
import t from 'tap';
import {
  Hints,
  HINT_BACKOFF_MS_MIN,
  HINT_REFUSALS_MAX,
  HINT_RESUME_PAUSE_MS,
  type Hint,
} from '../../src/cluster/hints.js';
import { NotFound, StaleEpoch, StaleLayout, Unavailable } from '../../src/util/errors.js';
import { componentLogger } from '../../src/util/log.js';

/** A Hints over a fake target `n3` and hand-fired timers. */
function harness(
  options: { perNodeMax?: number; max?: number; perNodeBytesMax?: number; bytesMax?: number } = {},
) {
  const timers: Array<{ fn: () => void; ms: number; cancelled: boolean }> = [];
  const state = {
    down: true,
    member: true,
    landed: [] as string[],
    scans: [] as Array<string[] | undefined>,
    scanFails: false,
  };
  const hints = new Hints({
    addressOf: (nodeId) => (state.member ? `${nodeId}:7000` : undefined),
    fallBack: (_nodeId, tenants) => {
      state.scans.push(tenants === undefined ? undefined : [...tenants].sort());
      return state.scanFails ? Promise.reject(Unavailable('n3 down')) : Promise.resolve();
    },
    log: componentLogger('test'),
    schedule: (fn, ms) => {
      const timer = { fn, ms, cancelled: false };
      timers.push(timer);
      return { cancel: () => (timer.cancelled = true) };
    },
    ...options,
  });
  const hint = (name: string, tenantId = 'acme', bytes?: number): Hint => ({
    tenantId,
    ...(bytes === undefined ? {} : { bytes }),
    send: (address) => {
      if (state.down) return Promise.reject(Unavailable(`${address} is not reachable`));
      state.landed.push(name);
      return Promise.resolve();
    },
  });
  /** Fires the timers due now and waits for the sends they start. */
  const tick = async (): Promise<number[]> => {
    const due = timers.splice(0).filter((timer) => !timer.cancelled);
    for (const timer of due) timer.fn();
    for (let turn = 0; turn < 20; turn += 1) await Promise.resolve();
    await new Promise((resolve) => setImmediate(resolve));
    return due.map((timer) => timer.ms);
  };
  return { hints, hint, state, tick, timers };
}

t.test('missed writes are sent again in order once the target is back', async (t) => {
  const { hints, hint, state, tick } = harness();
  for (const name of ['create', 'part-1', 'complete']) hints.add('n3', hint(name), Unavailable());
  t.equal(hints.pending('n3'), 3, 'three hints held for n3');
  t.same(await tick(), [HINT_BACKOFF_MS_MIN], 'the first try waits the least backoff');
  t.same(await tick(), [HINT_BACKOFF_MS_MIN * 2], 'a failed try doubles the backoff');
  t.same(await tick(), [HINT_BACKOFF_MS_MIN * 4], 'and again');
  t.same(state.landed, [], 'nothing lands while n3 is down');
  state.down = false;
  await tick();
  t.same(state.landed, ['create'], 'the first lands once n3 is back');
  t.same(await tick(), [HINT_RESUME_PAUSE_MS], 'the rest wait while n3 starts up');
  t.same(state.landed, ['create', 'part-1', 'complete'], 'every hint lands, in order');
  t.equal(hints.pending(), 0, 'none held any more');
  t.equal(hints.figures.delivered, 3, 'counted as delivered');
  t.same(state.scans, [], 'no repair scan was needed');
});

t.test('hints for a member that is no longer a storage member are dropped', async (t) => {
  const { hints, hint, state, tick } = harness();
  hints.add('n3', hint('a'), Unavailable());
  hints.add('n3', hint('b'), Unavailable());
  await tick();
  state.member = false;
  await tick();
  t.equal(hints.pending(), 0, 'dropped');
  t.equal(hints.figures.abandoned, 2, 'counted as abandoned');
  t.same(state.landed, [], 'nothing sent');
});

t.test('a write refused as placed by a stale layout is not hinted', async (t) => {
  const { hints, hint, timers } = harness();
  hints.add('n3', hint('a'), StaleLayout('layout 3 seen'));
  t.equal(hints.pending(), 0, 'not held');
  t.equal(timers.length, 0, 'nothing scheduled');
});

t.test('a write refused under a stale epoch is hinted, and lands under the new one', async (t) => {
  const { hints, hint, state, tick } = harness();
  hints.add('n3', hint('a'), StaleEpoch('epoch 4 seen'));
  t.equal(hints.pending(), 1, 'held: a hint is sent under the epoch of its own time');
  state.down = false;
  await tick();
  t.same(state.landed, ['a'], 'sent again and landed');
  t.equal(hints.pending(), 0);
});

t.test('overflow and refusals fall back to a repair scan once the target is back', async (t) => {
  const { hints, hint, state, tick } = harness({ perNodeMax: 2 });
  hints.add('n3', hint('a', 'acme'), Unavailable());
  hints.add('n3', hint('b', 'acme'), Unavailable());
  hints.add('n3', hint('c', 'globex'), Unavailable());
  t.equal(hints.pending('n3'), 2, 'the bound holds');
  t.equal(hints.figures.overflowed, 1, 'the third is counted as overflowed');
  await tick();
  t.same(state.scans, [], 'no scan while n3 is down');
  state.down = false;
  state.scanFails = true;
  await tick();
  await tick();
  t.same(state.landed, ['a', 'b'], 'the held hints land');
  t.same(state.scans, [['globex']], 'a scan of the overflowed tenant is tried');
  state.scanFails = false;
  await tick();
  t.same(state.scans, [['globex'], ['globex']], 'a failed scan is run again');
  t.equal(hints.figures.repairScans, 2, 'both counted');
  t.same(await tick(), [], 'then nothing is left to do');

  // A hint the target refuses (not for being down) is tried a bounded number of times.
  let refusals = 0;
  hints.add(
    'n3',
    {
      tenantId: 'initech',
      send: () => {
        refusals += 1;
        return Promise.reject(NotFound('no such upload'));
      },
    },
    Unavailable(),
  );
  hints.add('n3', hint('d'), Unavailable());
  for (let turn = 0; turn < HINT_REFUSALS_MAX + 1 && hints.pending() > 0; turn += 1) await tick();
  t.equal(refusals, HINT_REFUSALS_MAX, 'a refused hint is tried a bounded number of times');
  t.equal(hints.figures.givenUp, 1, 'then given up');
  t.same(state.landed.slice(-1), ['d'], 'and the next one lands');
  t.same(state.scans.slice(-1), [['initech']], 'its tenant is scanned');
});

t.test('the total bound holds across targets', async (t) => {
  const { hints, hint } = harness({ max: 3 });
  for (const node of ['n2', 'n3', 'n4', 'n5']) hints.add(node, hint(node), Unavailable());
  t.equal(hints.pending(), 3, 'at most three held');
  t.equal(hints.figures.overflowed, 1, 'one overflowed');
  hints.close();
  t.equal(hints.pending(), 0, 'closing drops them');
});

t.test('hints are bounded by the memory they hold, per target and in all', async (t) => {
  const { hints, hint, state, tick } = harness({ perNodeBytesMax: 1000, bytesMax: 1500 });
  hints.add('n3', hint('big', 'acme', 600), Unavailable());
  hints.add('n3', hint('bigger', 'globex', 600), Unavailable());
  t.equal(hints.pending('n3'), 1, 'a second large manifest does not fit the per-target bound');
  t.equal(hints.pendingBytes('n3'), 600);
  hints.add('n3', hint('small', 'acme', 300), Unavailable());
  t.equal(hints.pendingBytes('n3'), 900, 'a small one still fits');
  hints.add('n2', hint('other', 'initech', 700), Unavailable());
  t.equal(hints.pending('n2'), 0, 'nor does one past the total bound');
  t.equal(hints.figures.overflowed, 2, 'both counted as overflowed');
  state.down = false;
  await tick();
  await tick();
  t.same(state.landed, ['big', 'small'], 'the held ones land');
  t.equal(hints.pendingBytes(), 0, 'and hold nothing once delivered');
  t.same(state.scans.flat().sort(), ['globex', 'initech'], 'the overflowed tenants are scanned');
});
