// Goal: lightwell/client's ingest stream against a real service: objects put over the stream read
// back byte for byte through the native API with what a PUT stores (content type, metadata,
// checksums); a body larger than the window and the frame limit streams through; a refused
// object rejects with the native API's problem object while the others commit; putAll yields
// every outcome; a token minted from an access key works as a given one; an idempotent resend
// replays instead of writing twice.
// Method: `lightwell serve` on loopback; the client from src/client; reads with plain fetch.

import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { Service } from '../helpers/service.js';
import { LightwellClient, LightwellProblem, type PutOutcome } from '../../src/client/index.js';

t.test('the ingest stream writes what a PUT writes', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const data = await service.tenant('acme');
  const endpoint = service.publicUrl.replace(/\/api\/v1$/, '');
  const client = new LightwellClient({
    endpoint,
    accessKeyId: data.accessKeyId,
    secretKey: data.secretKey,
  });
  await client.createBucket('logs');
  const stream = client.ingest('logs');
  const progress: number[] = [];
  stream.on('progress', (p: { objectsAcknowledged: number }) =>
    progress.push(p.objectsAcknowledged),
  );

  const small = await stream.put('dir/a.txt', 'hello, stream', {
    contentType: 'text/plain',
    metadata: { origin: 'test' },
  });
  t.match(small, {
    key: 'dir/a.txt',
    size: 13,
    contentType: 'text/plain',
    metadata: { origin: 'test' },
  });
  t.ok(small.checksums['CRC32C'], 'a CRC32C is stored');

  // Larger than the window (8 MiB) and than a frame (1 MiB): streams on credit.
  const large = randomBytes(20 * 1024 * 1024 + 17);
  const [bigResult, ...many] = await Promise.all([
    stream.put('big.bin', large),
    ...Array.from({ length: 300 }, (_, i) => stream.put(`many/${i}`, `object ${i}`)),
  ]);
  t.equal(bigResult.size, large.length);
  t.equal(many.length, 300);

  const refused = await stream.put('x', 'y', { bucket: 'nope' }).catch((error: unknown) => error);
  t.ok(refused instanceof LightwellProblem, 'a refusal rejects with the problem');
  t.match(refused, { status: 404, code: 'not_found' });

  const outcomes: PutOutcome[] = [];
  for await (const outcome of stream.putAll(
    (function* () {
      for (let i = 0; i < 50; i += 1) yield { key: `all/${i}`, body: Buffer.from(`all ${i}`) };
      yield { key: '', body: 'empty key' };
    })(),
  ))
    outcomes.push(outcome);
  t.equal(outcomes.length, 51, 'putAll yields every outcome');
  t.equal(outcomes.filter((o) => 'error' in o).length, 1, 'the bad key is refused');
  await stream.close();
  t.ok(progress.length >= 350, 'progress events');

  const read = await client.getObject('logs', 'big.bin');
  t.equal(
    createHash('sha256')
      .update(read ?? '')
      .digest('hex'),
    createHash('sha256').update(large).digest('hex'),
    'the large object reads back byte for byte',
  );
  t.equal((await client.getObject('logs', 'many/299'))?.toString(), 'object 299');
  t.equal((await client.getObject('logs', 'all/49'))?.toString(), 'all 49');
  const listed = await client.listObjects('logs', { prefix: 'many/' });
  t.equal((listed as { objects: unknown[] }).objects.length, 300);

  // An idempotent resend is a replay: the same version, nothing written twice.
  const given = new LightwellClient({ endpoint, token: data.token });
  const again = given.ingest('logs');
  const first = await again.put('idem', 'same', { idempotencyKey: 'k-1' });
  const second = await again.put('idem', 'same', { idempotencyKey: 'k-1' });
  t.same(second, first, 'the replay answers as the first');
  const other = await again
    .put('idem', 'different', { idempotencyKey: 'k-1' })
    .catch((e: unknown) => e);
  t.match(other, { status: 422, code: 'idempotency_key_reused' });
  await again.close();
});
