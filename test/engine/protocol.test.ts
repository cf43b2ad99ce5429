// Goal: the engine command protocol. Frames decode the same however the byte stream is split;
// requests pipeline over one connection and responses are matched by id in any order; errors
// cross the socket as typed errors (code, status, details); the client fails the requests in
// flight on a lost connection with engine_unavailable and reconnects when the engine is back;
// nothing a peer sends on the socket takes the engine down.
// Method: fast-check properties over FrameDecoder (seeds print on failure); EngineClient
// against a scripted unix-socket server (to reorder, split and drop); EngineClient against the
// real engine started in this process on a temporary data directory, stopped and restarted;
// and the engine as a child process for the hostile-peer check.
import t from 'tap';
import fc from 'fast-check';
import { createServer, createConnection, type Server, type Socket } from 'node:net';
import { spawn } from 'node:child_process';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import {
  FrameDecoder,
  encodeFrame,
  EngineClient,
  FRAME_BYTES_MAX,
  type Request,
} from '../../src/engine/protocol.js';
import { startEngine } from '../../src/engine/engine.js';
import { loadSettings } from '../../src/util/config.js';
import { errorCode, isLightwellError } from '../../src/util/errors.js';
import { tempDir, settle } from './segment-testing.js';

const here = dirname(fileURLToPath(import.meta.url));
const ENGINE_BIN = resolve(here, '../../bin/lightwell-engine.js');

const message = fc.record(
  {
    i: fc.nat(),
    o: fc.string({ maxLength: 20 }),
    a: fc.oneof(
      fc.constant(null),
      fc.dictionary(
        fc.string({ maxLength: 8 }),
        fc.oneof(
          fc.string(),
          fc.integer(),
          fc.boolean(),
          fc.double({ noNaN: true }).map((x) => (x === 0 ? 0 : x)),
        ),
        { noNullPrototype: true },
      ),
      fc.uint8Array({ maxLength: 3000 }).map((bytes) => ({ bytes: Buffer.from(bytes) })),
      fc.array(fc.string(), { maxLength: 5 }),
    ),
  },
  { noNullPrototype: true },
);

function splitAt(bytes: Buffer, cuts: readonly number[]): Buffer[] {
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let start = 0;
  for (const point of points) {
    parts.push(bytes.subarray(start, point));
    start = point;
  }
  parts.push(bytes.subarray(start));
  return parts;
}

t.test('frames decode the same however the stream is split', async (t) => {
  fc.assert(
    fc.property(
      fc.array(message, { maxLength: 20 }),
      fc.array(fc.nat(), { maxLength: 40 }),
      (messages, cuts) => {
        const stream = Buffer.concat(messages.map((entry) => encodeFrame(entry)));
        const decoder = new FrameDecoder();
        const decoded: unknown[] = [];
        for (const part of splitAt(stream, cuts)) decoded.push(...decoder.push(part));
        return isDeepStrictEqual(decoded, messages);
      },
    ),
    { numRuns: 200 },
  );
  t.pass('200 random streams, split at random points');
  fc.assert(
    fc.property(fc.array(message, { minLength: 1, maxLength: 10 }), (messages) => {
      // One byte at a time: every frame boundary falls inside a push.
      const stream = Buffer.concat(messages.map((entry) => encodeFrame(entry)));
      const decoder = new FrameDecoder();
      const decoded: unknown[] = [];
      for (let offset = 0; offset < stream.length; offset += 1)
        decoded.push(...decoder.push(stream.subarray(offset, offset + 1)));
      return decoded.length === messages.length;
    }),
    { numRuns: 30 },
  );
  t.pass('30 random streams, fed one byte at a time');
});

t.test('a frame longer than the limit is refused before it is buffered', async (t) => {
  const decoder = new FrameDecoder();
  const head = Buffer.alloc(4);
  head.writeUInt32LE(FRAME_BYTES_MAX + 1, 0);
  t.throws(() => decoder.push(head), { code: 'payload_too_large' });
});

/** A scripted engine: hands each decoded request and its socket to `onRequest`. */
async function fakeEngine(
  t: Tap,
  path: string,
  onRequest: (request: Request, socket: Socket) => void,
): Promise<Server> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const decoder = new FrameDecoder();
    socket.on('data', (data: Buffer) => {
      for (const request of decoder.push(data)) onRequest(request as Request, socket);
    });
  });
  await new Promise<void>((resolveListen) => server.listen(path, resolveListen));
  t.teardown(
    () =>
      new Promise<void>((resolveClose) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolveClose());
      }),
  );
  return server;
}

type Tap = { teardown(fn: () => unknown): void };

t.test(
  'pipelined requests are matched by id, whatever the order and the splits of the answers',
  async (t) => {
    const path = join(tempDir(t), 'fake.sock');
    const held: Array<{ request: Request; socket: Socket }> = [];
    await fakeEngine(t, path, (request, socket) => {
      held.push({ request, socket });
      if (held.length < 100) return;
      // Answer all 100, newest first, as one stream cut into 7-byte pieces.
      const stream = Buffer.concat(
        held.reverse().map(({ request: r }) =>
          encodeFrame(
            r.o === 'fail'
              ? {
                  i: r.i,
                  e: {
                    code: 'precondition_failed',
                    message: `no ${String((r.a as { n: number }).n)}`,
                    details: { n: (r.a as { n: number }).n },
                  },
                }
              : { i: r.i, r: { echo: r.a } },
          ),
        ),
      );
      const target = held[0]?.socket as Socket;
      for (let offset = 0; offset < stream.length; offset += 7)
        target.write(stream.subarray(offset, offset + 7));
    });
    const client = new EngineClient(path, 2000);
    t.teardown(() => client.close());
    const calls = Array.from({ length: 100 }, (_, n) =>
      client.callUnchecked(n % 10 === 3 ? 'fail' : 'echo', { n }).then(
        (value) => ({ n, value }),
        (error: unknown) => ({ n, error }),
      ),
    );
    const results = await Promise.all(calls);
    for (const result of results) {
      if (result.n % 10 === 3) {
        const error = (result as { error: unknown }).error;
        if (
          !isLightwellError(error) ||
          error.code !== 'precondition_failed' ||
          error.status !== 412 ||
          error.details['n'] !== result.n
        ) {
          t.fail(`request ${result.n}: expected a typed precondition_failed, got ${String(error)}`);
        }
      } else if ((result as { value?: { echo: { n: number } } }).value?.echo.n !== result.n) {
        t.fail(`request ${result.n} got another request's answer`);
      }
    }
    t.pass('100 pipelined requests, answered in reverse in 7-byte pieces, each got its own answer');
  },
);

t.test(
  'a lost connection fails the requests in flight, and the next call reconnects',
  async (t) => {
    const path = join(tempDir(t), 'fake.sock');
    let drop = true;
    await fakeEngine(t, path, (request, socket) => {
      if (drop) {
        drop = false;
        socket.destroy();
        return;
      }
      socket.write(encodeFrame({ i: request.i, r: 'pong' }));
    });
    const client = new EngineClient(path, 2000);
    t.teardown(() => client.close());
    await t.rejects(
      client.call('ping', {}),
      { code: 'engine_unavailable' },
      'the request in flight fails with engine_unavailable',
    );
    t.equal(await client.call('ping', {}), 'pong', 'the next call reconnected');
  },
);

t.test('reconnectWhile connects again at once after a lost connection, while wanted', async (t) => {
  const path = join(tempDir(t), 'fake.sock');
  const connections: Socket[] = [];
  const server = await fakeEngine(t, path, (request, socket) => {
    socket.write(encodeFrame({ i: request.i, r: 'pong' }));
  });
  server.on('connection', (socket: Socket) => connections.push(socket));
  const client = new EngineClient(path, 2000);
  t.teardown(() => client.close());
  let wanted = true;
  client.reconnectWhile(() => wanted);
  let connected = 0;
  let onConnect: (() => void) | undefined;
  client.onConnected(() => {
    connected += 1;
    onConnect?.();
  });
  t.equal(await client.call('ping', {}), 'pong');
  t.equal(connected, 1, 'the first connection');
  const again = new Promise<void>((resolve) => (onConnect = resolve));
  connections.at(-1)?.destroy();
  await again;
  t.equal(connected, 2, 'connected again with no call made (the listeners ran)');
  t.ok(client.connected, 'and the connection is open');
  wanted = false;
  connections.at(-1)?.destroy();
  await new Promise<void>((resolve) => setTimeout(resolve, 300)); // what a reconnect would take
  t.equal(connected, 2, 'not once it is no longer wanted');
  t.notOk(client.connected, 'the client waits for its next call');
});

t.test('stopWaiting ends a wait for an engine that is gone, also one already begun', async (t) => {
  const path = join(tempDir(t), 'nobody.sock');
  const client = new EngineClient(path, 3_600_000); // far past this test's time limit
  t.teardown(() => client.close());
  const waiting = client.call('ping', {}).then(
    () => 'answered',
    (error: unknown) => errorCode(error),
  );
  await new Promise((resolve) => setTimeout(resolve, 100)); // the client is retrying by now
  client.stopWaiting();
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    waiting,
    new Promise((resolve) => {
      timer = setTimeout(() => resolve('still waiting after 150 s'), 150_000);
    }),
  ]);
  clearTimeout(timer);
  t.equal(outcome, 'engine_unavailable', 'the wait in progress gives up (it had an hour left)');
  await t.rejects(client.call('ping', {}), { code: 'engine_unavailable' }, 'and the next call');
});

t.test('a peer that sends garbage does not take the client down', async (t) => {
  // Runs in a child process: today the uncaught exception would end the test process itself.
  const dir = tempDir(t);
  const path = join(dir, 'fake.sock');
  await fakeEngine(t, path, (_request, socket) => {
    const head = Buffer.alloc(4);
    head.writeUInt32LE(FRAME_BYTES_MAX + 1, 0);
    socket.write(head);
  });
  const script = `
    const { EngineClient } = await import(${JSON.stringify(resolve(here, '../../src/engine/protocol.js'))});
    const client = new EngineClient(${JSON.stringify(path)}, 1000);
    const outcome = await client.call('ping', {}).then(() => 'resolved', (error) => error.code);
    console.log(outcome);
    client.close();
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (data: Buffer) => {
    out += data.toString();
  });
  const code = await new Promise<number | null>((resolveExit) => child.on('exit', resolveExit));
  t.equal(code, 0, 'the client process survives');
  t.equal(out.trim(), 'engine_unavailable', 'and the request fails as engine_unavailable');
});

t.test('the real engine: pipelining, typed errors, and reconnecting after a restart', async (t) => {
  const dataDir = tempDir(t, 'lw-protocol-');
  const settings = loadSettings({ flags: { data_dir: dataDir } });
  let engine = await startEngine({ dataDir, settings });
  t.teardown(() => engine.stop());
  const client = new EngineClient(join(dataDir, 'engine.sock'), 5000);
  t.teardown(() => client.close());

  const pings = await Promise.all(Array.from({ length: 500 }, () => client.call('ping', {})));
  t.ok(
    pings.every((pong) => pong.ok),
    '500 pipelined pings answered',
  );

  const unknown = await client.callUnchecked('noSuchCommand', {}).catch((error: unknown) => error);
  t.ok(isLightwellError(unknown), 'an error crosses the socket as a LightwellError');
  t.match(unknown, { code: 'method_not_allowed', status: 405 });
  const missing = await client
    .call('createBucket', { tenantId: 'nobody', name: 'bucket-one' })
    .catch((error: unknown) => error);
  t.match(
    missing,
    { code: 'not_found', status: 404, message: /tenant nobody/ },
    "a command's own error keeps its code and message",
  );

  await engine.stop();
  await t.rejects(
    new EngineClient(join(dataDir, 'engine.sock'), 200).call('ping', {}),
    { code: 'engine_unavailable' },
    'no engine: engine_unavailable once the connect timeout passes',
  );
  const during = client.call('ping', {});
  await settle(300);
  engine = await startEngine({ dataDir, settings });
  t.same(
    await during,
    { ok: true },
    'a call made while the engine was down went through once it was back',
  );
  t.same(await client.call('ping', {}), { ok: true });
});

t.test('nothing a peer sends on the socket takes the engine down', async (t) => {
  const dataDir = tempDir(t, 'lw-protocol-');
  const child = spawn(
    process.execPath,
    [ENGINE_BIN, '--data-dir', dataDir, '--log-level', 'silent'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let stderr = '';
  child.stderr.on('data', (data: Buffer) => {
    stderr += data.toString();
  });
  await new Promise<void>((resolveReady, reject) => {
    child.stdout.on('data', (data: Buffer) => {
      if (data.toString().includes('ready')) resolveReady();
    });
    child.once('exit', (code) =>
      reject(new Error(`engine exited with ${String(code)}: ${stderr}`)),
    );
  });
  const socketPath = join(dataDir, 'engine.sock');
  const send = (bytes: Buffer): Promise<void> =>
    new Promise((resolveSent) => {
      const socket = createConnection(socketPath);
      socket.on('error', () => resolveSent());
      socket.on('connect', () => {
        socket.end(bytes);
        setTimeout(() => {
          socket.destroy();
          resolveSent();
        }, 100);
      });
    });
  const frameOf = (body: Buffer): Buffer => {
    const head = Buffer.alloc(4);
    head.writeUInt32LE(body.length, 0);
    return Buffer.concat([head, body]);
  };
  const hostile: Array<{ name: string; bytes: Buffer; todo?: string }> = [
    {
      name: 'a frame longer than the limit',
      bytes: Buffer.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3]),
    },
    { name: 'a body that is not msgpack', bytes: frameOf(Buffer.from([0xc1, 0xc1, 0xc1])) },
    { name: 'a truncated frame, then close', bytes: Buffer.from([100, 0, 0, 0, 1, 2]) },
    { name: 'a request that is a number', bytes: encodeFrame(5 as unknown as object) },
    { name: 'a request that is msgpack nil', bytes: frameOf(Buffer.from([0xc0])) },
  ];
  for (const entry of hostile) {
    await send(entry.bytes);
    await settle(150);
    const client = new EngineClient(socketPath, 1000);
    const alive = await client.call('ping', {}).then(
      (pong) => pong.ok,
      () => false,
    );
    client.close();
    if (entry.todo) t.ok(alive, `the engine survives ${entry.name}`, { todo: entry.todo });
    else t.ok(alive, `the engine survives ${entry.name}`);
    if (!alive) break;
  }
  t.equal(errorCode(undefined), undefined);
});
