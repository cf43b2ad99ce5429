// Goal: `cluster.listen` hands data messages on to the engine's local socket (node-rpc.ts
// `forwardOne`) each on a connection of its own, never on one kept alive from an earlier message:
// the engine's listener closes an idle connection after its keep-alive timeout, and a message
// written on a pooled connection as it closes failed with ECONNRESET (a 503 for a message the
// engine never saw; the drain test met it now and then). Hop-by-hop headers are not forwarded.
// Method: a listener with a forward, in front of a plain HTTP server on a local socket that
// counts its connections; three messages sent in turn through the front.
import t from 'tap';
import { createServer } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MSGPACK_CODEC, startRpcListener } from '../../src/cluster/node-rpc.js';
import { componentLogger } from '../../src/util/log.js';

t.test('each forwarded message takes a connection of its own', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lw-forward-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const socketPath = join(dir, 'data.sock');
  let connections = 0;
  const seen: Array<string | undefined> = [];
  const engine = createServer((request, response) => {
    seen.push(request.headers['connection']);
    request.resume();
    request.on('end', () => {
      const body = MSGPACK_CODEC.encode({ ok: true });
      response.writeHead(200, { 'Content-Type': MSGPACK_CODEC.contentType });
      response.end(body);
    });
  });
  engine.on('connection', () => (connections += 1));
  await new Promise<void>((resolve) => engine.listen(socketPath, resolve));
  t.teardown(() => new Promise<void>((resolve) => engine.close(() => resolve())));
  const front = await startRpcListener({
    host: '127.0.0.1',
    port: 0,
    forward: { prefix: '/cluster/v1/data/', socketPath, codec: MSGPACK_CODEC },
    codec: MSGPACK_CODEC,
    bytesMax: 1024,
    requestMs: 10_000,
    routes: new Map(),
    log: componentLogger('test'),
    what: 'test listener',
    closeBusy: true,
  });
  t.teardown(() => front.close());
  for (let index = 0; index < 3; index += 1) {
    const answer = await fetch(`http://127.0.0.1:${front.port}/cluster/v1/data/heads`, {
      method: 'POST',
      headers: { 'Content-Type': MSGPACK_CODEC.contentType },
      body: MSGPACK_CODEC.encode({ index }),
      signal: AbortSignal.timeout(10_000),
    });
    t.equal(answer.status, 200, `message ${index} answered`);
    t.same(MSGPACK_CODEC.decode(Buffer.from(await answer.arrayBuffer())), { ok: true });
  }
  t.equal(connections, 3, 'three messages, three connections to the engine: none reused');
  t.same(
    seen,
    ['close', 'close', 'close'],
    'each says it closes; the sender’s keep-alive is not passed on',
  );
});
