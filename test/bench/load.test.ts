// Goal: the benchmark's HTTP/1.1 client and load generator parse every response correctly however
// it is split across TCP packets, write planned bodies byte-exact under backpressure, verify
// bodies by CRC32, and recover from early answers, closes and protocol errors.
// Method: drive the uWS sink child process, and node:net servers that parse the request
// themselves and drip scripted responses a few bytes per packet (TCP_NODELAY, a timer turn
// between writes); feed the parser directly one byte at a time. Loads run on the Node client
// (`client: 'node'`), the reference that native-load.test.ts compares the native one with.

import t from 'tap';
import { crc32 } from '@node-rs/crc32';
import {
  makeTemplate,
  planChecksums,
  repeatedCrc32,
  SINK_SOURCE_SEED,
  TEMPLATE_BYTES,
} from '../../bench/data.js';
import { Http1Connection, parseTarget } from '../../bench/http1.js';
import { ResponseParser } from '../../bench/http1-parser.js';
import { startSink } from '../../bench/limits.js';
import { runLoad } from '../../bench/load.js';
import {
  chunkedResponse,
  contentLengthResponse,
  scriptedServer,
  type SeenRequest,
} from './scripted-server.js';

const MiB = 1024 * 1024;

const payload = makeTemplate('random', 4096, 99).subarray(0, 3001);

t.test('parser: a response fed one byte at a time', async (t) => {
  const wire = Buffer.concat([
    Buffer.from('HTTP/1.1 100 Continue\r\n\r\n', 'latin1'),
    chunkedResponse(payload, 700),
  ]);
  const parser = new ResponseParser();
  parser.begin({ noBody: false, crc: true, collect: true });
  let end = -1;
  for (let i = 0; i < wire.length && !parser.done; i++) end = parser.feed(wire, i, i + 1);
  t.ok(parser.done, 'complete');
  t.equal(end, wire.length, 'ends at the last byte');
  const result = parser.result();
  t.equal(result.status, 200);
  t.equal(result.bodyBytes, payload.length);
  t.equal(result.crc32, crc32(payload));
  t.same(result.body, payload, 'collected body');
});

t.test('parser: bad input is an error, not a hang', async (t) => {
  const parser = new ResponseParser();
  parser.begin({ noBody: false, crc: false, collect: false });
  t.throws(() => parser.feed(Buffer.from('HTTP/2 200\r\n\r\n'), 0, 14), /bad status line/);
  parser.begin({ noBody: false, crc: false, collect: false });
  const bad = Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
  t.throws(() => parser.feed(bad, 0, bad.length), /bad chunk size/);
});

t.test('Content-Length response dripped 5 bytes per packet; keep-alive reuse', async (t) => {
  const { target, seen } = await scriptedServer(t, {
    respond: () => contentLengthResponse(payload),
    pieceBytes: 5,
  });
  const connection = new Http1Connection(target);
  t.teardown(() => connection.close());
  for (let round = 0; round < 2; round++) {
    const response = await connection.request({ method: 'GET', path: '/a', crc: true });
    t.equal(response.status, 200);
    t.equal(response.headers['x-test'], 'yes');
    t.equal(response.bodyBytes, payload.length);
    t.equal(response.crc32, crc32(payload));
  }
  t.equal(connection.connects, 1, 'one connection for both requests');
  t.ok(connection.reads > 200, `the responses arrived in ${connection.reads} reads`);
  t.equal(seen.length, 2);
  t.match(seen[0]?.head ?? '', /^GET \/a HTTP\/1\.1\r\nHost: 127\.0\.0\.1:\d+$/);
});

t.test('chunked response with extensions and trailers, dripped 3 bytes per packet', async (t) => {
  const { target } = await scriptedServer(t, {
    respond: () => chunkedResponse(payload, 1000),
    pieceBytes: 3,
  });
  const connection = new Http1Connection(target);
  t.teardown(() => connection.close());
  const response = await connection.request({
    method: 'GET',
    path: '/c',
    crc: true,
    collect: true,
  });
  t.equal(response.bodyBytes, payload.length);
  t.equal(response.crc32, crc32(payload));
  t.same(response.body, payload);
  t.ok(connection.reads > 100, `the response arrived in ${connection.reads} reads`);
});

t.test('no-body, close-delimited and Connection: close responses', async (t) => {
  const answers = [
    Buffer.from('HTTP/1.1 204 No Content\r\n\r\n'),
    Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n'),
    contentLengthResponse(payload.subarray(0, 10), 'Connection: close\r\n'),
  ];
  const { target } = await scriptedServer(t, { respond: (_r, i) => answers[i % 3] ?? null });
  const connection = new Http1Connection(target);
  t.teardown(() => connection.close());
  t.equal((await connection.request({ method: 'DELETE', path: '/x' })).status, 204);
  const head = await connection.request({ method: 'HEAD', path: '/x' });
  t.equal(head.bodyBytes, 0, 'HEAD has no body despite Content-Length');
  const closing = await connection.request({ method: 'GET', path: '/x' });
  t.equal(closing.keepAlive, false);
  t.equal(closing.bodyBytes, 10);
  t.equal((await connection.request({ method: 'DELETE', path: '/x' })).status, 204);
  t.equal(connection.connects, 2, 'reconnected after Connection: close');

  const untilClose = await scriptedServer(t, {
    respond: () => Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\n\r\n'), payload]),
    close: true,
  });
  const second = new Http1Connection(untilClose.target);
  const response = await second.request({ method: 'GET', path: '/eof', crc: true });
  t.equal(response.bodyBytes, payload.length, 'body delimited by the close');
  t.equal(response.crc32, crc32(payload));
  second.close();
});

t.test('planned bodies arrive byte-exact, also when the server stops reading', async (t) => {
  const echo = (request: SeenRequest): Buffer =>
    contentLengthResponse(Buffer.from(`${request.body.length} ${crc32(request.body)}`));
  const template = makeTemplate('text');
  for (const pauseMs of [0, 300]) {
    const { target } = await scriptedServer(t, {
      respond: echo,
      pieceBytes: 64,
      ...(pauseMs ? { pauseMs } : {}),
    });
    const connection = new Http1Connection(target);
    for (const [seed, length] of [
      [1, 24 * MiB + 17],
      [2, 4096],
      [null, 70_000],
      [3, 0],
    ] as const) {
      const plan = { template, length, seed };
      const response = await connection.request({
        method: 'PUT',
        path: '/p',
        body: plan,
        collect: true,
      });
      const expected = `${length} ${planChecksums(plan, Buffer.alloc(MiB)).crc32}`;
      t.equal(
        response.body?.toString(),
        expected,
        `pause ${pauseMs} ms, seed ${String(seed)}, ${length} bytes`,
      );
      t.equal(response.bodySent, length);
    }
    t.equal(connection.connects, 1);
    if (pauseMs > 0) {
      t.ok(connection.drainWaits > 0, `writer waited for drain ${connection.drainWaits} times`);
    }
    connection.close();
  }
});

t.test('an early answer stops the body; the next request reconnects', async (t) => {
  const { target } = await scriptedServer(t, {
    respond: () =>
      Buffer.from(
        'HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\n' + 'Connection: close\r\n\r\nbig!',
      ),
    early: true,
  });
  const connection = new Http1Connection(target);
  t.teardown(() => connection.close());
  const plan = { template: makeTemplate('random'), length: 64 * MiB, seed: 5 };
  const response = await connection.request({ method: 'PUT', path: '/big', body: plan });
  t.equal(response.status, 413);
  t.ok(response.bodySent < plan.length, `stopped after ${response.bodySent} bytes`);
  const again = await connection.request({ method: 'PUT', path: '/small', body: Buffer.from('x') });
  t.equal(again.status, 413);
  t.equal(connection.connects, 2);
});

t.test('close mid-response and trailing garbage are failures', async (t) => {
  const cut = await scriptedServer(t, {
    respond: () => Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly-part'),
    close: true,
  });
  const connection = new Http1Connection(cut.target);
  await t.rejects(
    connection.request({ method: 'GET', path: '/cut' }),
    /closed before the response ended/,
  );
  const garbage = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA');
  const sameRead = await scriptedServer(t, { respond: () => garbage, pieceBytes: garbage.length });
  const result = await runLoad({
    client: 'node',
    target: sameRead.target,
    connections: 1,
    requests: 1,
    makeRequest: () => ({ method: 'GET', path: '/' }),
  });
  t.equal(result.failures, 1, 'bytes after the response in the same read fail the request');
  const later = await scriptedServer(t, { respond: () => garbage, pieceBytes: 2 });
  const other = new Http1Connection(later.target);
  const before = await other.request({ method: 'GET', path: '/' });
  t.equal(before.status, 200, 'complete before the garbage');
  await new Promise((resolve) => setTimeout(resolve, 50));
  await other.request({ method: 'GET', path: '/' }).catch(() => undefined);
  t.equal(other.connects, 2, 'late garbage closed the connection');
  other.close();
  connection.close();
});

t.test('uWS sink: PUT discarded, GET verified, load generator counts', async (t) => {
  const sink = await startSink();
  t.teardown(() => sink.stop());
  const target = parseTarget(`http://127.0.0.1:${sink.port}`);
  const connection = new Http1Connection(target);
  t.teardown(() => connection.close());
  const put = await connection.request({
    method: 'PUT',
    path: '/x',
    collect: true,
    body: { template: makeTemplate('random'), length: 5 * MiB + 3, seed: 42 },
  });
  t.equal(put.status, 200);
  t.equal(put.body?.toString(), 'ok');
  t.equal(put.bodySent, 5 * MiB + 3);
  const size = 9 * MiB + 5;
  const get = await connection.request({ method: 'GET', path: `/blob/${size}`, crc: true });
  t.equal(get.bodyBytes, size);
  t.equal(get.crc32, repeatedCrc32(makeTemplate('random', TEMPLATE_BYTES, SINK_SOURCE_SEED), size));
  t.equal(connection.connects, 1, 'keep-alive across PUT and GET');

  const progress: number[] = [];
  const load = await runLoad({
    client: 'node',
    target,
    connections: 8,
    requests: 300,
    progressIntervalMs: 5,
    makeRequest: () => ({ method: 'GET', path: '/tiny', expectBytes: 2 }),
    onProgress: (p) => progress.push(p.requestsDone),
  });
  t.equal(load.failures, 0);
  t.equal(load.requests, 300);
  t.equal(load.latency.count, 300);
  t.equal(load.connects, 8);
  t.equal(progress[progress.length - 1], 300, 'final progress report');

  const wrong = await runLoad({
    client: 'node',
    target,
    connections: 2,
    requests: 4,
    makeRequest: () => ({ method: 'GET', path: '/blob/1000', expectCrc32: 1 }),
  });
  t.equal(wrong.failures, 4);
  t.match(wrong.failureSamples[0] ?? '', /CRC32/);
});
