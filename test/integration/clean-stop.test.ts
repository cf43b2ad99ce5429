// Goal: a clean stop leaves no segment open. The pool's worker threads each append to a
// segment of their own; Piscina ends them without a word, so before pool-seal.ts every SIGTERM
// left those segments open and the next start scanned each one to its end to recover it.
// Method: concurrent uploads of several large chunks (stored by the pool, not the gateway's
// thread) open segments on the workers; serve gets SIGTERM; the index, read after the exit,
// must hold every segment sealed at its file's size, and the objects must read back after a
// restart.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { Service } from '../helpers/service.js';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, type SegmentRecord } from '../../src/engine/index/schema.js';
import { segmentFileName } from '../../src/format/segment-header.js';

t.test('a clean stop seals every open segment, the pool workers’ too', async (t) => {
  const service = await Service.start({ args: ['--workers', '3'] });
  t.teardown(() => service.close());
  const client = await service.tenant('sealed');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'box' } })).status, 201);
  // 4 MiB of random bytes cut into chunks of about 1 MiB, six at once: every worker stores some.
  const bodies = Array.from({ length: 6 }, () => randomBytes(4 * 1024 * 1024));
  const puts = await Promise.all(bodies.map((body, i) => client.put('box', `o${i}`, body)));
  t.same(
    puts.map((answer) => answer.status),
    bodies.map(() => 200),
  );

  t.equal(await service.stop(), 0, 'serve exits cleanly');
  const store = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: true });
  const segments = [...store.range<SegmentRecord>(DB.segments, {})].map(({ value }) => value);
  await store.close();
  t.ok(segments.length >= 3, `segments written: ${segments.length}`);
  for (const segment of segments) {
    t.not(segment.state, 'open', `segment ${segment.id} is not left open`);
    if (segment.state !== 'sealed') continue;
    const file = join(service.dataDir, 'segments', segmentFileName(segment.id));
    t.equal(statSync(file).size, segment.size, `segment ${segment.id} sealed at its file's size`);
  }

  await service.launch();
  for (const [i, body] of bodies.entries()) {
    const answer = await client.get('box', `o${i}`);
    t.equal(answer.status, 200);
    t.ok(answer.bytes.equals(body), `o${i} reads back byte-exact`);
  }
});
