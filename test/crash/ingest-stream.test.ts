// Goal: the ingest stream keeps its promise across a crash: with 4 connections streaming, the
// whole service is SIGKILLed and restarted; every object acknowledged before, during or after
// reads back byte for byte, and the client's resend of the objects it had no acknowledgement for
// writes nothing twice (each key has exactly one version in a versioned bucket: a resend of a
// committed object was replayed by its idempotency key).
// Method: `lightwell serve`, 4 ingest streams of lightwell/client (each minting its token from
// an access key, so they reconnect on their own), kill -9 of the process tree once a few hundred
// objects are acknowledged, a restart on the same ports and data directory, then the streams
// finish; reads and the versions listing through the native API.

import t from 'tap';
import { createHash } from 'node:crypto';
import { Service } from '../helpers/service.js';
import { LightwellClient, type PutResult } from '../../src/client/index.js';

const CONNECTIONS = 4;
const OBJECTS_PER_CONNECTION = 400;
const KILL_AFTER_ACKS = 300;

/** The body of object `i` of connection `c`: distinct, sized 1 B to ~40 KiB, and one of 3 MiB. */
function bodyOf(c: number, i: number): Buffer {
  if (i === 7) return Buffer.alloc(3 * 1024 * 1024 + c, `c${c}`);
  const seed = createHash('sha256').update(`${c}/${i}`).digest();
  const size = 1 + ((seed[0] ?? 0) * 160 + i);
  const body = Buffer.alloc(size);
  for (let at = 0; at < size; at += seed.length) seed.copy(body, at);
  return body;
}

t.test('acknowledged objects survive a SIGKILL; resends duplicate nothing', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const data = await service.tenant('acme');
  let response = await data.request('POST', '/buckets', { json: { name: 'crash' } });
  t.equal(response.status, 201);
  response = await data.request('PUT', '/buckets/crash/versioning', {
    json: { status: 'Enabled' },
  });
  t.equal(response.status, 200);
  const endpoint = service.publicUrl.replace(/\/api\/v1$/, '');
  const client = new LightwellClient({
    endpoint,
    accessKeyId: data.accessKeyId,
    secretKey: data.secretKey,
  });
  const acknowledged = new Map<string, PutResult>();
  let killed: Promise<void> | undefined;
  const refused: string[] = [];
  const streams = Array.from({ length: CONNECTIONS }, async (_, c) => {
    const stream = client.ingest('crash', { reconnectAttempts: 40 });
    const puts: Array<Promise<void>> = [];
    for (let i = 0; i < OBJECTS_PER_CONNECTION; i += 1) {
      const key = `c${c}/${i}`;
      puts.push(
        stream.put(key, bodyOf(c, i)).then(
          (result) => {
            acknowledged.set(key, result);
            if (acknowledged.size === KILL_AFTER_ACKS)
              killed = service.kill9().then(() => service.launch());
          },
          (error: unknown) => {
            refused.push(`${key}: ${String(error)}`);
          },
        ),
      );
    }
    await Promise.all(puts);
    await stream.close();
    return stream.stats();
  });
  const stats = await Promise.all(streams);
  await killed;
  t.ok(killed, 'the service was killed midway');
  t.same(refused, [], 'every object was stored in the end');
  t.ok(
    stats.some((s) => s.reconnects > 0),
    'the streams reconnected after the kill',
  );
  t.equal(acknowledged.size, CONNECTIONS * OBJECTS_PER_CONNECTION);

  await data.login();
  for (const [key, result] of acknowledged) {
    const [c, i] = key.slice(1).split('/').map(Number) as [number, number];
    const read = await data.get('crash', key);
    if (read.status !== 200 || !read.bytes.equals(bodyOf(c, i))) {
      t.fail(`${key} does not read back (${read.status})`);
      return;
    }
    if (read.headers.get('x-service-version-id') !== result.versionId) {
      t.fail(`${key}: the version read is not the one acknowledged`);
      return;
    }
  }
  t.pass('every acknowledged object reads back byte for byte, as acknowledged');

  // One version per key: no resend wrote an object twice.
  const counts = new Map<string, number>();
  let marker = '';
  for (;;) {
    const page = (await data.request('GET', `/buckets/crash/versions?maxKeys=1000${marker}`))
      .json as {
      versions: Array<{ key: string }>;
      isTruncated: boolean;
      nextKeyMarker?: string;
      nextVersionIdMarker?: string;
    };
    for (const version of page.versions)
      counts.set(version.key, (counts.get(version.key) ?? 0) + 1);
    if (!page.isTruncated) break;
    marker = `&keyMarker=${encodeURIComponent(page.nextKeyMarker ?? '')}&versionIdMarker=${encodeURIComponent(page.nextVersionIdMarker ?? '')}`;
  }
  t.equal(counts.size, CONNECTIONS * OBJECTS_PER_CONNECTION, 'every key listed');
  t.same(
    [...counts].filter(([, count]) => count !== 1),
    [],
    'exactly one version per key',
  );
});
