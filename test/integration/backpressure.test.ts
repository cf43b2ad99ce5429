// Goal: bounded body memory never deadlocks, and waiting for it never drops a connection; a
// slow download holds only its read-ahead. With an arena far smaller than the bytes in
// flight, many concurrent uploads of low-entropy bodies (which cut at the maximum chunk size, so
// a chunk spans the most blocks) all complete and read back exactly, and small uploads keep
// working alongside them.
// Method: a service with `limits.inflight_bytes_max` of 40 MiB (two large uploads admitted at a
// time), 10 concurrent 12 MiB uploads plus small ones, then read everything back. Then, with
// one upload's reserve of arena, a slow upload holds it for 16 s while another waits paused.
// Then the gateway's receive buffer setting, from its start-up log. Last, a 256 MiB object
// read by a client that rests every 4 MiB, with the gateway's private resident memory sampled
// from /proc.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { Service } from '../helpers/service.js';

// Each test has a service of its own; the second mostly waits (16 s of a trickled upload), so
// two run at once.
t.jobs = 2;

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

// uWS re-arms its 10 s idle timer whenever it delivers bytes, also after the socket was paused;
// an upload that then waits paused for longer than that must not be dropped.
t.test('an upload waiting paused for admission outlives the idle timeout', async (t) => {
  // 16 MiB of arena is one upload's reserve: the slow upload holds it all while it trickles in.
  // One listener thread: another would have an arena of its own for the second upload.
  const service = await Service.start({
    args: ['--limits.inflight_bytes_max', '16MiB', '--gateway-threads', '1'],
  });
  t.teardown(() => service.close());
  const client = await service.tenant('acme');
  await client.request('POST', '/buckets', { json: { name: 'waiting' } });
  const slowBody = randomBytes(32 * MiB);
  const slow = slowPut(`${client.baseUrl}/buckets/waiting/objects/slow`, client.token, slowBody, {
    sliceBytes: MiB,
    intervalMs: 500,
  });
  await delay(1_000);
  const waitingBody = randomBytes(4 * MiB);
  const started = Date.now();
  const waiting = await client.put('waiting', 'waiting', waitingBody);
  const waitedMs = Date.now() - started;
  t.equal(waiting.status, 200, `the waiting upload succeeded after ${waitedMs} ms`);
  t.ok(waitedMs > 10_000, 'it waited longer than the idle timeout');
  t.equal(await slow, 200, 'the slow upload succeeded');
  t.same((await client.get('waiting', 'waiting')).bytes, waitingBody);
  t.same((await client.get('waiting', 'slow')).bytes, slowBody);
});

const MiB = 1024 * 1024;

/** A PUT whose body arrives `sliceBytes` every `intervalMs`; resolves to the status. */
function slowPut(
  url: string,
  token: string,
  body: Buffer,
  pace: { sliceBytes: number; intervalMs: number },
): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = { Authorization: `Bearer ${token}`, 'Content-Length': String(body.length) };
    const req = request(url, { method: 'PUT', headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    let offset = 0;
    const writeSlice = (): void => {
      req.write(body.subarray(offset, offset + pace.sliceBytes));
      offset += pace.sliceBytes;
      if (offset < body.length) return;
      clearInterval(timer);
      req.end();
    };
    const timer = setInterval(writeSlice, pace.intervalMs);
    writeSlice();
  });
}

t.test('the gateway caps the receive buffer of its connections', async (t) => {
  // Why the cap: test/http/receive-buffer.test.ts; this checks that the setting reaches it.
  const service = await Service.start({
    args: ['--log-level', 'info', '--limits.socket_receive_bytes', '128KiB'],
  });
  t.teardown(() => service.close());
  // The gateway's log line and the supervisor's ready line travel different ways (the child's
  // stderr, and IPC then the supervisor's stdout): the log line may come just after.
  const logged = (): string | undefined =>
    (service.startOutput + service.output)
      .split('\n')
      .find((text) => text.includes('"msg":"receive buffer set"'));
  for (let waited = 0; logged() === undefined && waited < 5000; waited += 50) await delay(50);
  const line = logged();
  t.ok(line, 'the gateway logged the receive buffer it set');
  t.match(JSON.parse(line ?? '{}'), {
    port: service.publicPort,
    requested: 131072,
    kernel: 262144,
  });
});

// A download holds only the pieces it reads ahead of the socket: a slow reader of a large
// object must not make the gateway hold the object.
t.test('a slow download of a large object keeps the gateway small', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const client = await service.tenant('acme');
  await client.request('POST', '/buckets', { json: { name: 'reads' } });
  const body = randomBytes(256 * MiB);
  t.equal((await client.put('reads', 'large', body)).status, 200);
  const gateway = service.pids().find((pid) => commandOf(pid).includes('lightwell-gateway'));
  if (gateway === undefined) throw new Error('no gateway process');
  const before = anonymousBytes(gateway);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, anonymousBytes(gateway))), 50);
  const read = await slowGet(`${client.baseUrl}/buckets/reads/objects/large`, client.token);
  clearInterval(sampler);
  t.equal(read.status, 200);
  t.ok(read.digest === createHash('sha256').update(body).digest('hex'), 'the bytes are right');
  const grewMiB = Math.round((peak - before) / MiB);
  t.ok(grewMiB < 96, `the gateway grew by ${grewMiB} MiB while a 256 MiB object streamed`);
});

function commandOf(pid: number): string {
  return readFileSync(`/proc/${pid}/cmdline`, 'latin1');
}

/** Private (anonymous) resident bytes of a process. */
function anonymousBytes(pid: number): number {
  const match = /^RssAnon:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
  return Number(match?.[1] ?? 0) * 1024;
}

/** A GET that reads its body 4 MiB at a time with pauses, so the server waits on the socket. */
function slowGet(url: string, token: string): Promise<{ status: number; digest: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { Authorization: `Bearer ${token}` } }, (res) => {
      const hash = createHash('sha256');
      let sinceRest = 0;
      res.on('data', (data: Buffer) => {
        hash.update(data);
        sinceRest += data.length;
        if (sinceRest < 4 * MiB) return;
        sinceRest = 0;
        res.pause();
        setTimeout(() => res.resume(), 20);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, digest: hash.digest('hex') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
