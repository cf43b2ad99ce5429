// Goal: a retry of an idempotent PUT whose first attempt died with its gateway commits at once.
// The first attempt's key is held `running` in the index; a gateway that fails a request frees
// it, but one that is killed cannot, and the retry used to get 409 idempotency_key_in_use for
// 15 minutes (the stale time). The record names the gateway process that holds it, and a retry
// takes the key over once that process is gone.
// Method: the real service; a PUT with an Idempotency-Key sends half its body over a raw socket,
// the gateway is killed with SIGKILL, serve starts a new one, and the same PUT is sent whole.
import t from 'tap';
import { connect } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Service } from '../helpers/service.js';

const MiB = 1024 * 1024;

t.test('a retry after the gateway died takes the idempotency key over', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const client = await service.tenant('idem');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'box' } })).status, 201);
  const body = randomBytes(4 * MiB);
  const headers = {
    'Idempotency-Key': 'retry-after-crash',
    'X-Service-Checksum-SHA256': createHash('sha256').update(body).digest('base64'),
  };

  // The first attempt: its head and half its body, then nothing.
  const socket = connect(service.publicPort, '127.0.0.1');
  await new Promise((connected) => socket.once('connect', connected));
  socket.on('error', () => undefined); // the gateway is killed under it
  const head = [
    'PUT /api/v1/buckets/box/objects/doc HTTP/1.1',
    'Host: 127.0.0.1',
    `Authorization: Bearer ${client.token}`,
    `Content-Length: ${body.length}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ].join('\r\n');
  socket.write(`${head}\r\n\r\n`);
  socket.write(body.subarray(0, body.length / 2));
  await sleep(500); // the key is claimed when the head arrives; give the engine time to commit it

  const gateway = service
    .pids()
    .find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes('lightwell-gateway'));
  if (gateway === undefined) throw new Error('no gateway process');
  process.kill(gateway, 'SIGKILL');
  socket.destroy();

  // serve starts a new gateway; the retry sends the same request whole.
  let retry = await client.put('box', 'doc', body, headers).catch(() => undefined);
  for (let attempt = 0; attempt < 100 && retry?.status !== 200; attempt += 1) {
    if (retry !== undefined && retry.status !== 503) break; // an answer, not the gateway's absence
    await sleep(100);
    retry = await client.put('box', 'doc', body, headers).catch(() => undefined);
  }
  t.equal(retry?.status, 200, 'the retry commits (it was 409 for 15 minutes)');
  const read = await client.get('box', 'doc');
  t.ok(read.bytes.equals(body), 'the object reads back whole');
  const again = await client.put('box', 'doc', body, headers);
  t.equal(again.status, 200, 'a second retry replays');
  t.same(again.json, retry?.json, 'with the same answer');
});
