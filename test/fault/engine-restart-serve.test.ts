// Goal: the engine process SIGKILLed under live gateways (the supervisor restarts it) costs
// writes only a pause: while it is gone and until each gateway's writer has registered its open
// segment with the new engine again (docs/architecture.md, "A restarted engine and the live
// writers"), PUTs answer 200 or 503, never another status; afterwards they answer 200 again
// without a restart of the gateways, and every object acknowledged before, during or after the
// restart reads back byte for byte.
// Method: `lightwell serve` with two gateways; four writers PUT distinct objects in a loop; once
// 40 are acknowledged the engine child is SIGKILLed; the writers go on until 40 more are
// acknowledged by the restarted engine (a new engine pid). Waits are on those counts, bounded
// by the file's time limit (test/helpers/deadline.ts), never by a fixed pause.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { Service, type DataClient } from '../helpers/service.js';
import { untilDeadline } from '../helpers/deadline.js';

/** The pid of the service's engine process, from the command lines of its tree. */
function enginePid(service: Service): number | undefined {
  return service.pids().find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('engine');
    } catch {
      return false;
    }
  });
}

/** A body that names its key, so a wrong object read back cannot pass. */
function bodyOf(key: string): Buffer {
  return Buffer.from(`${key}:${createHash('sha256').update(key).digest('hex')}`.repeat(64));
}

t.test('a SIGKILLed engine under live gateways: 503s while it is gone, then 200s', async (t) => {
  const service = await Service.start({ gateways: 2 });
  t.teardown(() => service.close());
  const client: DataClient = await service.tenant('restart');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'box' } })).status, 201);
  const first = enginePid(service);
  t.ok(first, 'the engine process is found');

  const acked: string[] = [];
  const statuses = new Map<number, number>();
  let ackedAfterRestart = 0;
  let restarted = false;
  let stop = false;
  let next = 0;
  const writer = async (): Promise<void> => {
    while (!stop) {
      const key = `k${next++}`;
      const answer = await client.put('box', key, bodyOf(key));
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      if (answer.status === 200) {
        acked.push(key);
        if (restarted) ackedAfterRestart += 1;
      }
    }
  };
  const writers = Promise.all([writer(), writer(), writer(), writer()]);
  const until = async (what: () => string, done: () => boolean): Promise<void> => {
    await untilDeadline(
      (async () => {
        while (!done()) await new Promise((resolve) => setTimeout(resolve, 20));
      })(),
      what,
    );
  };
  try {
    await until(
      () => `40 acknowledged PUTs before the kill (${acked.length} came)`,
      () => acked.length >= 40,
    );
    process.kill(first as number, 'SIGKILL');
    await until(
      () => 'the supervisor to start a new engine process',
      () => {
        const now = enginePid(service);
        restarted = now !== undefined && now !== first;
        return restarted;
      },
    );
    await until(
      () =>
        `40 PUTs acknowledged by the restarted engine (${ackedAfterRestart} came; answers so ` +
        `far ${JSON.stringify([...statuses])})`,
      () => ackedAfterRestart >= 40,
    );
  } finally {
    stop = true;
    await writers;
  }
  t.same(
    [...statuses.keys()].filter((status) => status !== 200 && status !== 503),
    [],
    `every PUT answered 200 or 503 (${JSON.stringify([...statuses])})`,
  );
  t.comment(`answers: ${JSON.stringify([...statuses])}`);
  let wrong = 0;
  for (const key of acked) {
    const read = await client.get('box', key);
    if (read.status !== 200 || !read.bytes.equals(bodyOf(key))) wrong += 1;
  }
  t.equal(wrong, 0, `all ${acked.length} acknowledged objects read back byte for byte`);
});
