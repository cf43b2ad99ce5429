// Goal: the native load generator (bench/native/loadgen.c) reports exactly what the Node client
// reports for the same requests: status, headers that checks read, body bytes, CRC32, kept
// bodies, body bytes sent (and it reconnects after `Connection: close` as the Node client does,
// within what timing decides); it writes stamped bodies byte for byte as `fillSlice` fills them;
// it fails, as the Node client does, a wrong status, a short body, a wrong length or
// CRC32, a close mid-response, bytes after a response, a malformed head or chunk, a server that
// never answers and a refused connection, and parses responses however they are split; it runs
// duration loads from a period of requests, reports progress, and its CPU counts as the client's.
// The build script builds it where asked and warns without a compiler.
// Method: the same loads through runLoad with `client: 'node'` and `client: 'native'` against
// the scripted node:net server of scripted-server.ts (the server computes the CRC32 of each body
// it receives, compared with `planChecksums`) and against the uWS sink. Every test skips, with
// the reason, where the executable was not built.

import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { createServer, type Socket } from 'node:net';
import { crc32 } from '@node-rs/crc32';
import {
  type BodyPlan,
  makeTemplate,
  planChecksums,
  repeatedCrc32,
  SINK_SOURCE_SEED,
  TEMPLATE_BYTES,
} from '../../bench/data.js';
import { parseTarget, type ResponseResult, type Target } from '../../bench/http1.js';
import { startSink } from '../../bench/limits.js';
import {
  clientCpuSeconds,
  type LoadClient,
  type LoadOptions,
  type LoadRequest,
  type LoadResult,
  runLoad,
} from '../../bench/load.js';
import { nativeClientCpuSeconds, nativeLoadAvailable } from '../../bench/native-load.js';
import { checkBuild } from '../helpers/build-native.js';
import {
  chunkedResponse,
  contentLengthResponse,
  type Script,
  scriptedServer,
  type SeenRequest,
} from './scripted-server.js';

const MiB = 1024 * 1024;
const skip = nativeLoadAvailable()
  ? false
  : 'the native load generator was not built (npm run build needs a C compiler on Linux)';
/** Response bodies of GET /blob/<n>: the first n bytes of this (a template repeated). */
const blobSource = makeTemplate('random', 256 * 1024, 77);

function blob(bytes: number): Buffer {
  return Buffer.from(blobSource.subarray(0, bytes));
}

/** What a check sees of a response: everything both clients must agree on. */
function summary(response: ResponseResult): Record<string, unknown> {
  return {
    status: response.status,
    bodyBytes: response.bodyBytes,
    crc32: response.crc32,
    body: response.body?.toString('latin1') ?? null,
    xTest: response.headers['x-test'] ?? null,
    keepAlive: response.keepAlive,
    bodySent: response.bodySent,
  };
}

function framed(body: Buffer, chunked: boolean, extra = ''): Buffer {
  if (!chunked) return contentLengthResponse(body, extra);
  const response = chunkedResponse(body, 7000);
  return extra === '' ? response : Buffer.concat([Buffer.from(extra), response]);
}

/** Echoes a PUT body's length and CRC32; GET /blob/<n>/<cl|chunked>; 204; Connection: close. */
function answer(request: SeenRequest): Buffer {
  const [line = ''] = request.head.split('\r\n');
  const [method = '', path = ''] = line.split(' ');
  const parts = path.split('/');
  const chunked = parts.includes('chunked');
  if (method === 'PUT') {
    const echo = JSON.stringify({ bytes: request.body.length, crc32: crc32(request.body) });
    return framed(Buffer.from(echo), chunked);
  }
  if (parts[1] === 'empty') return Buffer.from('HTTP/1.1 204 No Content\r\nX-Test: yes\r\n\r\n');
  if (parts[1] === 'close') return contentLengthResponse(blob(10), 'Connection: close\r\n');
  const body = blob(Number(parts[2]));
  if (method === 'HEAD') {
    return Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`, 'latin1');
  }
  return framed(body, chunked);
}

interface Mix {
  readonly requests: readonly LoadRequest[];
  readonly plans: readonly (BodyPlan | null)[];
}

/** PUTs of stamped and plain plans of every awkward length, a Buffer, GETs, HEAD, 204, close. */
function requestMix(): Mix {
  // A small template, so that bodies repeat it and cross slice and template boundaries.
  const template = makeTemplate('text', 64 * 1024, 5);
  const lengths = [0, 1, 19, 20, 4095, 4096, 4097, 64 * 1024 + 3, 300_000 + 17];
  const requests: LoadRequest[] = [{ method: 'GET', path: '/close' }];
  const plans: (BodyPlan | null)[] = [null];
  for (const [i, length] of lengths.entries()) {
    for (const seed of [1000 + i, null]) {
      const plan = { template, length, seed };
      const path = `/echo/${i % 2 === 0 ? 'cl' : 'chunked'}`;
      requests.push({ method: 'PUT', path, body: plan, collect: true });
      plans.push(plan);
    }
  }
  requests.push({ method: 'POST', path: '/echo/cl', body: Buffer.from('hello'), collect: true });
  plans.push(null);
  for (const bytes of [0, 1, 3001, 100_000]) {
    for (const mode of ['cl', 'chunked']) {
      const expectCrc32 = crc32(blob(bytes));
      requests.push({
        method: 'GET',
        path: `/blob/${bytes}/${mode}`,
        expectBytes: bytes,
        expectCrc32,
      });
      plans.push(null);
    }
  }
  requests.push({ method: 'HEAD', path: '/blob/3001/cl' }, { method: 'GET', path: '/close' });
  requests.push({ method: 'GET', path: '/empty', expectStatus: [200, 204] });
  plans.push(null, null, null);
  return { requests, plans };
}

interface Observed {
  readonly result: LoadResult;
  readonly seen: Record<string, unknown>[];
}

/** Runs `requests` (twice over) on one client; every response's summary, by request index. */
async function observe(
  client: LoadClient,
  target: Target,
  requests: readonly LoadRequest[],
  extra: Partial<LoadOptions> = {},
): Promise<Observed> {
  const seen: Record<string, unknown>[] = [];
  const result = await runLoad({
    target,
    client,
    connections: 3,
    requests: requests.length * 2,
    makeRequest: (i) => {
      const request = requests[i % requests.length];
      if (request === undefined) return null;
      return {
        ...request,
        check: (response) => {
          seen[i] = summary(response);
          return null;
        },
      };
    },
    ...extra,
  });
  return { result, seen };
}

t.test('native and Node clients report the same for the same requests', { skip }, async (t) => {
  const { target, seen: received } = await scriptedServer(t, {
    respond: answer,
    pieceBytes: 64 * 1024,
  });
  const { requests, plans } = requestMix();
  const node = await observe('node', target, requests);
  const receivedByNode = received.splice(0).map((request) => request.head);
  const native = await observe('native', target, requests);
  const receivedByNative = received.map((request) => request.head);
  t.equal(node.result.client, 'node');
  t.equal(native.result.client, 'native');
  t.equal(native.result.failures, 0, native.result.failureSamples.join('; '));
  t.equal(node.result.failures, 0, node.result.failureSamples.join('; '));
  t.same(native.seen, node.seen, 'every response, as checks see it');
  t.same(receivedByNative.sort(), receivedByNode.sort(), 'the same request heads');
  for (const field of ['requests', 'bytesSent', 'bytesReceived', 'statuses'] as const) {
    t.same(native.result[field], node.result[field], field);
  }
  // Four Connection: close answers; each costs a connect when its connection takes another
  // request, which the last ones may not (that depends on timing, for either client).
  for (const { result } of [node, native]) {
    const { connects, client } = result;
    t.ok(connects >= 3 + 2 && connects <= 3 + 4, `${client}: ${connects} connects`);
  }
  t.equal(native.result.latency.count, native.result.requests, 'a latency per request');
  // The stamped bodies reached the server byte for byte.
  const scratch = Buffer.alloc(MiB);
  for (const [i, plan] of plans.entries()) {
    if (plan === null) continue;
    const echo = JSON.parse(String(native.seen[i]?.['body'])) as { bytes: number; crc32: number };
    t.same(echo, { bytes: plan.length, crc32: planChecksums(plan, scratch).crc32 }, `plan ${i}`);
  }
});

t.test('responses split anywhere, interim answers, trailers', { skip }, async (t) => {
  const payload = blob(600);
  const wire = Buffer.concat([
    Buffer.from('HTTP/1.1 100 Continue\r\n\r\n', 'latin1'),
    chunkedResponse(payload, 200),
  ]);
  for (const [pieceBytes, response] of [
    [3, wire],
    [5, contentLengthResponse(payload)],
    [7, contentLengthResponse(payload.subarray(0, 40), 'X-Padding: ' + 'p'.repeat(300) + '\r\n')],
  ] as const) {
    const { target } = await scriptedServer(t, { respond: () => response, pieceBytes });
    const request = { method: 'GET', path: '/drip', crc: true, collect: true };
    const once = { connections: 1, requests: 1 };
    const node = await observe('node', target, [request], once);
    const native = await observe('native', target, [request], once);
    t.equal(native.result.failures, 0, native.result.failureSamples.join('; '));
    t.same(native.seen, node.seen, `${pieceBytes} bytes per packet`);
  }
});

/** A server that reads requests and never answers. */
async function silentServer(t: Test): Promise<Target> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return parseTarget(`http://127.0.0.1:${port}`);
}

/**
 * A server that answers every request with `bytes` and its FIN in one go (`socket.end`), so that
 * both reach the client together: the last bytes and the close arrive in one epoll event.
 */
async function endingServer(t: Test, bytes: Buffer): Promise<Target> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => socket.end(bytes));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return parseTarget(`http://127.0.0.1:${port}`);
}

/** A port that nothing listens on (a server's, closed again). */
async function closedPort(): Promise<Target> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return parseTarget(`http://127.0.0.1:${port}`);
}

interface Failing {
  readonly name: string;
  readonly script: Script;
  readonly request: LoadRequest;
  readonly pattern: RegExp;
}

const ok = contentLengthResponse(blob(3001));
const FAILING: readonly Failing[] = [
  {
    name: 'a wrong status (with the body in the message)',
    script: {
      respond: () => Buffer.from('HTTP/1.1 555 Odd\r\nContent-Length: 15\r\n\r\n{"code":"boom"}'),
    },
    request: { method: 'GET', path: '/', collect: true },
    pattern: /^GET \/: status 555, expected 200 \{"code":"boom"\}$/,
  },
  {
    name: 'a short body, then a close',
    script: {
      respond: () => Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly-part'),
      close: true,
    },
    request: { method: 'GET', path: '/' },
    pattern: /closed before the response ended/,
  },
  {
    name: 'a wrong length',
    script: { respond: () => ok, pieceBytes: 1000 },
    request: { method: 'GET', path: '/', expectBytes: 10 },
    pattern: /received 3001 body bytes, expected 10$/,
  },
  {
    name: 'a wrong CRC32',
    script: { respond: () => ok, pieceBytes: 1000 },
    request: { method: 'GET', path: '/', expectCrc32: 1 },
    pattern: /body CRC32 [0-9a-f]{8}, expected 00000001$/,
  },
  {
    name: 'a close in the middle of a chunked body',
    script: {
      respond: () => chunkedResponse(blob(3001), 1000).subarray(0, 1500),
      pieceBytes: 500,
      close: true,
    },
    request: { method: 'GET', path: '/' },
    pattern: /closed before the response ended/,
  },
  {
    name: 'bytes after the response',
    script: {
      respond: () => Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA'),
      pieceBytes: 100,
    },
    request: { method: 'GET', path: '/' },
    pattern: /5 bytes after the end of a response/,
  },
  {
    name: 'a bad status line',
    script: { respond: () => Buffer.from('HTTP/2 200\r\n\r\n') },
    request: { method: 'GET', path: '/' },
    pattern: /bad status line "HTTP\/2 200"/,
  },
  {
    name: 'a bad chunk size',
    script: {
      respond: () => Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'),
    },
    request: { method: 'GET', path: '/' },
    pattern: /bad chunk size "zz"/,
  },
  {
    name: 'a bad Content-Length',
    script: { respond: () => Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n') },
    request: { method: 'GET', path: '/' },
    pattern: /bad Content-Length "1x"/,
  },
  {
    name: 'a bad header line',
    script: { respond: () => Buffer.from('HTTP/1.1 200 OK\r\nno colon\r\n\r\n') },
    request: { method: 'GET', path: '/' },
    pattern: /bad header line "no colon"/,
  },
];

/** Every request fails on both clients, with a message that matches `pattern`. */
async function bothFail(
  t: Test,
  target: Target,
  request: LoadRequest,
  pattern: RegExp,
  idleTimeoutMs = 10_000,
) {
  for (const client of ['node', 'native'] as const) {
    const result = await runLoad({
      target,
      client,
      connections: 2,
      requests: 3,
      idleTimeoutMs,
      makeRequest: () => request,
    });
    t.equal(result.client, client);
    t.equal(result.failures, 3, `${client}: every request failed`);
    t.match(
      result.failureSamples[0] ?? '',
      pattern,
      `${client}: ${result.failureSamples[0] ?? 'none'}`,
    );
  }
}

t.test('failures are detected and described as the Node client does', { skip }, async (t) => {
  for (const failing of FAILING) {
    await t.test(failing.name, async (t) => {
      const { target } = await scriptedServer(t, failing.script);
      await bothFail(t, target, failing.request, failing.pattern);
    });
  }
  await t.test('a server that never answers', async (t) => {
    await bothFail(
      t,
      await silentServer(t),
      { method: 'GET', path: '/' },
      /no progress for 150 ms/,
      150,
    );
  });
  await t.test('a close that comes with the last bytes', async (t) => {
    const cut = chunkedResponse(blob(3001), 1000).subarray(0, 1500);
    const request = { method: 'GET', path: '/' };
    await bothFail(t, await endingServer(t, cut), request, /closed before the response ended/);
    const untilClose = Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\n\r\n'), blob(3001)]);
    const whole = await observe('native', await endingServer(t, untilClose), [request], {
      idleTimeoutMs: 10_000,
    });
    t.equal(whole.result.failures, 0, 'a body delimited by the close is complete');
    t.equal(whole.seen[0]?.['bodyBytes'], 3001);
  });
  await t.test('a refused connection', async (t) => {
    await bothFail(t, await closedPort(), { method: 'GET', path: '/' }, /ECONNREFUSED/);
  });
});

t.test('an early answer stops the body; the next request reconnects', { skip }, async (t) => {
  const { target } = await scriptedServer(t, {
    respond: () =>
      Buffer.from(
        'HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbig!',
      ),
    early: true,
  });
  // Long enough that the body cannot be out before the dripped answer is in.
  const plan = { template: makeTemplate('random'), length: 1024 * MiB, seed: 5 };
  const result = await runLoad({
    target,
    client: 'native',
    connections: 1,
    requests: 2,
    makeRequest: () => ({ method: 'PUT', path: '/big', body: plan, expectStatus: 413 }),
  });
  t.equal(result.failures, 2, 'a body not sent whole fails its request');
  t.match(result.failureSamples[0] ?? '', /^PUT \/big: sent \d+ of 1073741824 body bytes$/);
  t.same(result.statuses, { 413: 2 });
  t.equal(result.connects, 2);
});

t.test('uWS sink: large stamped PUT, large GET, a duration load, progress', { skip }, async (t) => {
  const sink = await startSink();
  t.teardown(() => sink.stop());
  const target = parseTarget(`http://127.0.0.1:${sink.port}`);
  const size = 9 * MiB + 5;
  const expectCrc32 = repeatedCrc32(makeTemplate('random', TEMPLATE_BYTES, SINK_SOURCE_SEED), size);
  const template = makeTemplate('random');
  const cpuBefore = nativeClientCpuSeconds();
  const clientBefore = clientCpuSeconds();
  const progress: number[] = [];
  const load = await runLoad({
    target,
    client: 'native',
    connections: 3,
    requests: 8,
    progressIntervalMs: 5,
    onProgress: (p) => progress.push(p.bytesSent + p.bytesReceived),
    makeRequest: (i) =>
      i % 2 === 0
        ? {
            method: 'PUT',
            path: '/x',
            collect: true,
            body: { template, length: 5 * MiB + 3, seed: i },
          }
        : { method: 'GET', path: `/blob/${size}`, expectBytes: size, expectCrc32 },
  });
  t.equal(load.failures, 0, load.failureSamples.join('; '));
  t.equal(load.bytesSent, 4 * (5 * MiB + 3));
  t.equal(load.bytesReceived, 4 * size + 4 * 2);
  t.ok(progress.length > 2, `${progress.length} progress reports`);
  t.equal(progress[progress.length - 1], load.bytesSent + load.bytesReceived, 'the last report');
  t.ok(nativeClientCpuSeconds() > cpuBefore, 'the native process CPU is counted');
  t.ok(clientCpuSeconds() - clientBefore >= nativeClientCpuSeconds() - cpuBefore);

  const timedLoad = await runLoad({
    target,
    client: 'native',
    connections: 8,
    durationMs: 200,
    period: 1,
    makeRequest: () => ({ method: 'GET', path: '/tiny', expectBytes: 2 }),
  });
  t.equal(timedLoad.client, 'native', 'a duration load with a period runs natively');
  t.equal(timedLoad.failures, 0);
  // It ran for its duration and then stopped by itself (it returned); how many requests fit in
  // 200 ms depends on the machine's load, so only "some" is asserted.
  t.ok(timedLoad.requests > 0, `${timedLoad.requests} requests in 200 ms`);
  t.ok(timedLoad.seconds >= 0.2, `ran its 200 ms duration (${timedLoad.seconds} s)`);
  t.equal(timedLoad.latency.count, timedLoad.requests);
  t.equal(timedLoad.connects, 8);
});

t.test('loads that cannot be built up front stay on the Node client', async (t) => {
  const target = parseTarget('http://127.0.0.1:1');
  const tls = parseTarget('https://127.0.0.1:1');
  const base = { connections: 1, makeRequest: () => null, client: 'native' as const };
  t.equal((await runLoad({ ...base, target, durationMs: 10 })).client, 'node', 'a duration');
  t.equal((await runLoad({ ...base, target })).client, 'node', 'no count');
  t.equal((await runLoad({ ...base, target: tls, requests: 1 })).client, 'node', 'TLS');
  t.equal((await runLoad({ ...base, target, requests: 1 })).client, 'node', 'null request');
  const none = await runLoad({ ...base, target, requests: 0 });
  t.same([none.client, none.requests, none.failures], ['node', 0, 0], 'no request');
});

t.test('the build script builds the load generator, or warns', async (t) => {
  const built = checkBuild(t, '--loadgen-out', /native load generator not built .*Node client/);
  if (built === null) return;
  const usage = spawnSync(built, [], { encoding: 'utf8' });
  t.equal(usage.status, 2, 'it runs, and wants its two files');
  t.match(usage.stderr, /usage: lightwell-loadgen REQUEST_FILE RESULT_FILE/);
});
