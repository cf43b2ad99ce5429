// Goal: a listener thread's pool tasks reach the gateway's pool and come back unchanged: values
// as they were, a read's ArrayBuffer moved rather than copied, a failure as the same error, and
// each task marked with the listener whose arenas it names.
// Method: PortTasks on one end of a MessageChannel, serveTasks with a recording pool on the other.
import t from 'tap';
import { MessageChannel } from 'node:worker_threads';
import { PortTasks, serveTasks } from '../../src/gateway/listener-threads.js';
import { NotFound, errorCode } from '../../src/util/errors.js';
import type { PoolTask, ReadTask } from '../../src/workers/protocol.js';

const keys = { tenantNum: 7, dataKey: new Uint8Array(32), dedupKey: new Uint8Array(32) };

function readTask(plainLength: number): ReadTask {
  return { kind: 'read', keys, chunkId: new Uint8Array([1, 2, 3]), plainLength };
}

t.test('tasks cross to the pool and their answers come back', async (t) => {
  const channel = new MessageChannel();
  const seen: PoolTask[] = [];
  const sent: ArrayBuffer[] = [];
  serveTasks(
    channel.port1,
    {
      run: async (request) => {
        seen.push(request);
        const length = request.task.kind === 'read' ? request.task.plainLength : 0;
        if (length === 0) throw NotFound('no such chunk');
        if (length === 1) return { ok: true, value: 'one' };
        const plaintext = new Uint8Array(length).fill(9).buffer;
        sent.push(plaintext);
        return plaintext;
      },
    },
    3,
  );
  const tasks = new PortTasks(channel.port2);
  t.teardown(() => {
    tasks.close();
    channel.port1.close();
  });

  const [one, bytes, missing] = await Promise.allSettled([
    tasks.run(readTask(1)),
    tasks.run(readTask(4096)),
    tasks.run(readTask(0)),
  ]);
  t.same(one, { status: 'fulfilled', value: { ok: true, value: 'one' } });
  t.equal(bytes.status, 'fulfilled');
  const buffer = (bytes as PromiseFulfilledResult<ArrayBuffer>).value;
  t.ok(buffer instanceof ArrayBuffer, 'the plaintext arrives as an ArrayBuffer');
  t.same(new Uint8Array(buffer), new Uint8Array(4096).fill(9));
  t.equal(sent[0]?.byteLength, 0, "the pool's buffer was moved, not copied");
  t.equal(missing.status, 'rejected');
  t.equal(errorCode((missing as PromiseRejectedResult).reason), 'not_found');

  t.same(
    seen.map((request) => request.listener),
    [3, 3, 3],
    "every task names the sending listener's arenas",
  );
  t.same(
    seen.map((request) => request.task.kind === 'read' && request.task.plainLength).sort(),
    [0, 1, 4096],
  );
  t.same((seen[0]?.task as ReadTask).chunkId, new Uint8Array([1, 2, 3]));
});
