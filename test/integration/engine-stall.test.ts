// Goal: a request never waits without bound on an engine that has stopped answering (SIGSTOP,
// a disk that hangs): past `engine.call_timeout` it is answered 503 `engine_unavailable` with
// Retry-After, and the engine, once it runs again, refuses the command that arrived past its
// deadline, so nothing the client was refused appears afterwards.
// Method: a service with a 2 s call timeout; its engine process is stopped with SIGSTOP, a PUT
// and a GET are sent, both must be answered 503; then SIGCONT, and the same requests succeed
// (the key refused earlier was never stored).
import t from 'tap';
import { readFileSync } from 'node:fs';
import { Service } from '../helpers/service.js';

t.test('requests to a stopped engine are answered 503 and leave nothing behind', async (t) => {
  const service = await Service.start({ args: ['--engine.call_timeout', '2s'] });
  t.teardown(() => service.close());
  const client = await service.tenant('acme');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'stall' } })).status, 201);
  t.equal((await client.put('stall', 'before', Buffer.from('before'))).status, 200);

  const engine = service
    .pids()
    .find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes('lightwell-engine'));
  if (engine === undefined) throw new Error('no engine process among the service processes');
  process.kill(engine, 'SIGSTOP');
  let resumed = false;
  const resume = (): void => {
    if (!resumed) process.kill(engine, 'SIGCONT');
    resumed = true;
  };
  t.teardown(resume);

  const put = await client.put('stall', 'during', Buffer.from('during'));
  t.equal(put.status, 503, 'a PUT while the engine is stopped');
  t.equal(put.headers.get('retry-after'), '1', 'with Retry-After');
  t.match(put.json, { code: 'unavailable' }, 'an internal cause is not named to clients');
  const listed = await client.request('GET', '/buckets/stall/objects');
  t.equal(listed.status, 200, 'a listing reads the index without the engine');

  resume();
  t.equal((await client.put('stall', 'after', Buffer.from('after'))).status, 200, 'a PUT after');
  t.equal((await client.get('stall', 'during')).status, 404, 'the refused PUT was not stored');
  t.same((await client.get('stall', 'before')).bytes, Buffer.from('before'));
});
