// Goal: an invariant failure in a handler ends the listener's process instead of answering 500
// and serving on (util/invariant.ts): an AssertionError or a ReferenceError is answered, then
// the process exits with it; a catalogue error and a TypeError are answered and the process
// serves on.
// Method: this file run again as a child process (LW_INVARIANT_CHILD) that mounts a listener
// with one handler per kind of failure and prints its port; the parent requests each and waits
// for the child's exit event.
import t from 'tap';
import assert from 'node:assert';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Router, type RouteDoc } from '../../src/http/router.js';
import { listen, type Handler } from '../../src/http/server.js';
import { componentLogger } from '../../src/util/log.js';
import { BadRequest } from '../../src/util/errors.js';
import { isInvariantFailure } from '../../src/util/invariant.js';

const DOC: RouteDoc = { summary: 'test', responses: { 200: { description: 'ok' } }, auth: 'none' };

async function child(): Promise<void> {
  const handlers: Record<string, Handler> = {
    refusal: () => {
      throw BadRequest('a request error');
    },
    'type-error': () => {
      new URL('not a url');
    },
    alive: (exchange) => exchange.send(200, {}, 'alive'),
    assertion: () => {
      assert.ok(1 + 1 === 3, 'live bytes below zero');
    },
    'async-reference': async () => {
      await new Promise((resolve) => setImmediate(resolve));
      throw new ReferenceError('undefinedName is not defined');
    },
  };
  const router = new Router<Handler>(
    '/api',
    Object.entries(handlers).map(([name, handler]) => ({
      method: 'GET' as const,
      path: `/${name}`,
      operationId: name,
      doc: DOC,
      handler,
    })),
  );
  const listener = await listen(
    { host: '127.0.0.1', port: 0, sharedPort: false },
    router,
    componentLogger('test'),
  );
  process.stdout.write(`port ${listener.port}\n`);
}

/** Starts the child serving route `failing` last; answers its port and its exit. */
async function startChild(): Promise<{
  port: number;
  exited: Promise<{ code: number | null; stderr: string }>;
}> {
  const script = fileURLToPath(import.meta.url);
  const proc = spawn(process.execPath, [script], {
    env: { ...process.env, LW_INVARIANT_CHILD: '1', TAP: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(proc, 'exit').then(([code]) => ({ code: code as number | null, stderr }));
  let stdout = '';
  for await (const chunk of proc.stdout) {
    stdout += (chunk as Buffer).toString();
    const match = /port (\d+)/.exec(stdout);
    if (match) return { port: Number(match[1]), exited };
  }
  throw BadRequest(`the child ended before it listened: ${stderr}`);
}

if (process.env['LW_INVARIANT_CHILD'] === '1') {
  await child();
} else {
  t.test('what counts as an invariant failure', async (t) => {
    t.ok(isInvariantFailure(new assert.AssertionError({ message: 'x' })));
    t.ok(isInvariantFailure(new ReferenceError('x')));
    t.notOk(isInvariantFailure(new TypeError('fetch failed')));
    t.notOk(isInvariantFailure(BadRequest('x')));
  });

  for (const failing of ['assertion', 'async-reference']) {
    t.test(`${failing}: answered, then the process ends`, async (t) => {
      const { port, exited } = await startChild();
      const get = (path: string): Promise<Response> =>
        fetch(`http://127.0.0.1:${port}/api/${path}`);
      t.equal((await get('refusal')).status, 400, 'a catalogue error is answered');
      t.equal((await get('type-error')).status, 500, 'a TypeError is answered as 500');
      t.equal((await get('alive')).status, 200, 'and the process serves on');
      const answer = await get(failing).then(
        (response) => response.status,
        () => 'no answer',
      );
      t.equal(answer, 500, 'the failing request is still answered');
      const { code, stderr } = await exited;
      t.not(code, 0, 'the process exits with a failure');
      t.match(stderr, failing === 'assertion' ? /live bytes below zero/ : /undefinedName/);
    });
  }
}
