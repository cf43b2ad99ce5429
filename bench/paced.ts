// `node dist/bench/paced.js`: server CPU per 4 KiB PUT, native and S3, at one fixed arrival rate.
//
// The throughput scenarios drive each API as fast as its client goes, so the two APIs reach the
// server at different rates: the AWS SDK, slow and starved on a loaded machine, leaves the
// server one request or two per event-loop turn, while the native load generator leaves it
// dozens. A small PUT's cost is mostly per commit group and per turn (the engine's transaction
// and fdatasync, the socket round trips and the wake-ups they cause), so the two figures
// compare arrival rates as much as APIs. Here both APIs send the same number of distinct 4 KiB
// bodies (never deduplicated) at the same rate, at most 64 in flight, and the server's CPU
// (`/proc` ticks of its process tree) is divided by the requests of the window.
//
// Usage: node dist/bench/paced.js [--rate N] [--count N] [--api native,s3] [--rounds N]
//        [--endpoint URL --admin-url URL --admin-token T --server-pid PID]
// Without --endpoint it starts Lightwell on a temp data directory, as `npm run bench` does.

import http from 'node:http';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { BenchError, errorMessage } from './bench-error.js';
import { sampleProcessTree } from './proc-stats.js';
import { openService, type Service } from './service.js';

const IN_FLIGHT_MAX = 64;
const WARM_UP = 200;
const BODY_BYTES = 4096;

type Put = (index: number, body: Buffer) => Promise<void>;

function httpCall(
  service: Service,
  agent: http.Agent,
  request: { method: string; path: string; headers: http.OutgoingHttpHeaders; body?: Buffer },
): Promise<{ status: number; text: string }> {
  const { target } = service;
  return new Promise((resolve, reject) => {
    const outgoing = http.request(
      { host: target.host, port: target.port, agent, ...request },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString() }),
        );
      },
    );
    outgoing.on('error', reject);
    outgoing.end(request.body);
  });
}

async function nativePut(service: Service, agent: http.Agent, bucket: string): Promise<Put> {
  const auth = (await service.authHeader()).replace(/^Authorization: /, '').trim();
  const created = await httpCall(service, agent, {
    method: 'POST',
    path: '/api/v1/buckets',
    headers: { authorization: auth, 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify({ name: bucket })),
  });
  if (created.status !== 201) throw new BenchError(`create bucket: ${created.status}`);
  return async (index, body) => {
    const answer = await httpCall(service, agent, {
      method: 'PUT',
      path: `/api/v1/buckets/${bucket}/objects/paced/${index}`,
      headers: { authorization: auth, 'content-type': 'application/octet-stream' },
      body,
    });
    if (answer.status !== 200 && answer.status !== 201)
      throw new BenchError(`PUT ${answer.status}: ${answer.text.slice(0, 200)}`);
  };
}

async function s3Put(service: Service, bucket: string): Promise<Put> {
  const credentials = service.credentials;
  if (!credentials) throw new BenchError('the S3 pass needs an access key pair');
  const client = new S3Client({
    endpoint: `http://${service.target.hostHeader}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretKey },
  });
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  return async (index, body) => {
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `paced/${index}`, Body: body }));
  };
}

/** `count` PUTs started at `rate` a second (at most IN_FLIGHT_MAX in flight). */
async function pacedRun(put: Put, rate: number, count: number, first: number): Promise<number> {
  const started = performance.now();
  const pending = new Set<Promise<void>>();
  let failures = 0;
  for (let index = 0; index < count; index++) {
    while (pending.size >= IN_FLIGHT_MAX) await Promise.race(pending);
    const wait = started + (index * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const body = Buffer.alloc(BODY_BYTES, index % 251);
    body.writeDoubleLE(Date.now(), 0);
    body.writeUInt32LE(first + index, 8);
    const done: Promise<void> = put(first + index, body)
      .catch((error: unknown) => {
        failures += 1;
        if (failures <= 3) process.stderr.write(`PUT failed: ${errorMessage(error)}\n`);
      })
      .finally(() => pending.delete(done));
    pending.add(done);
  }
  await Promise.all(pending);
  if (failures > 0) throw new BenchError(`${failures} of ${count} PUTs failed`);
  return (performance.now() - started) / 1000;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '100' },
      count: { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '1' },
      api: { type: 'string', default: 'native,s3' },
      endpoint: { type: 'string' },
      'admin-url': { type: 'string' },
      'admin-token': { type: 'string' },
      'server-pid': { type: 'string' },
    },
  });
  const rate = Number(values.rate);
  const count = Number(values.count);
  const service = await openService({
    endpoint: values.endpoint,
    adminUrl: values['admin-url'],
    adminToken: values['admin-token'],
    serverPid: values['server-pid'] === undefined ? undefined : Number(values['server-pid']),
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT_MAX });
  try {
    if (service.pid === null) throw new BenchError('server CPU needs --server-pid');
    const pid = service.pid;
    const suffix = Date.now().toString(36);
    for (const api of values.api.split(',')) {
      const bucket = `lwbench-paced-${api}-${suffix}`;
      const put =
        api === 's3' ? await s3Put(service, bucket) : await nativePut(service, agent, bucket);
      await pacedRun(put, rate, WARM_UP, 0);
      for (let round = 0; round < Number(values.rounds); round++) {
        const before = sampleProcessTree(pid, false);
        const load = loadavg()[0] ?? 0;
        const seconds = await pacedRun(put, rate, count, WARM_UP + round * count);
        const after = sampleProcessTree(pid, false);
        if (!before || !after) throw new BenchError('the service exited');
        const micros = ((after.cpuSeconds - before.cpuSeconds) / count) * 1e6;
        const line =
          `${api}: ${count} × 4 KiB PUT at ${(count / seconds).toFixed(0)}/s, ` +
          `server CPU ${micros.toFixed(0)} µs a request, load ${load.toFixed(1)}` +
          `–${(loadavg()[0] ?? 0).toFixed(1)}\n`;
        process.stdout.write(line);
      }
    }
  } finally {
    agent.destroy();
    await service.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`paced: ${errorMessage(error)}\n`);
  process.exitCode = 1;
});
