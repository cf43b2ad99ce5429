// Goal: bounded body memory never deadlocks. With an arena far smaller than the bytes in
// flight, many concurrent uploads of low-entropy bodies (which cut at the maximum chunk size, so
// a chunk spans the most blocks) all complete and read back exactly, and small uploads keep
// working alongside them.
// Method: a service with `limits.inflight_bytes_max` of 40 MiB (two large uploads admitted at a
// time), 10 concurrent 12 MiB uploads plus small ones, then read everything back.
import t from 'tap';
import { createHash } from 'node:crypto';
import { Service } from '../helpers/service.js';

t.test('uploads wait for admission instead of deadlocking', async (t) => {
  const service = await Service.start({ args: ['--limits.inflight_bytes_max', '40MiB'] });
  t.teardown(() => service.close());
  const client = await service.tenant('acme');
  await client.request('POST', '/buckets', { json: { name: 'pressure' } });
  const bodies = Array.from({ length: 10 }, (_, i) => Buffer.alloc(12 * 1024 * 1024, i + 1));
  const small = Array.from({ length: 20 }, (_, i) => Buffer.from(`small-${i}`));
  const started = Date.now();
  const results = await Promise.all([
    ...bodies.map((body, i) => client.put('pressure', `big-${i}`, body)),
    ...small.map((body, i) => client.put('pressure', `small-${i}`, body)),
  ]);
  t.same(
    results.map((r) => r.status),
    results.map(() => 200),
    'every upload succeeded',
  );
  t.comment(`30 uploads (120 MiB) through a 40 MiB arena in ${Date.now() - started} ms`);
  for (const [i, body] of bodies.entries()) {
    const read = await client.get('pressure', `big-${i}`);
    t.equal(
      createHash('sha256').update(read.bytes).digest('hex'),
      createHash('sha256').update(body).digest('hex'),
      `big-${i}`,
    );
  }
  for (const [i, body] of small.entries())
    t.same((await client.get('pressure', `small-${i}`)).bytes, body);
});
