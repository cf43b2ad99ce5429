// Goal: the listener settles every request exactly once, whether its handler answers before it
// returns (no promise) or later: a handler that throws, rejects, or returns without answering
// gets a problem object with the error's status (500 for the last), and the audit sink sees each
// exchange once, after its answer, with that status. A path that merely begins with the
// prefix's letters is no route (404).
// Method: `listen` on loopback with a Router of handlers of each kind and an audit sink that
// records what it is given; plain fetch requests.
import t from 'tap';
import type { AuditSink } from '../../src/http/audit.js';
import type { Exchange } from '../../src/http/exchange.js';
import { Router, type RouteDoc } from '../../src/http/router.js';
import { listen, type Handler } from '../../src/http/server.js';
import { componentLogger } from '../../src/util/log.js';
import { BadRequest, NotFound, Unavailable } from '../../src/util/errors.js';

const DOC: RouteDoc = { summary: 'test', responses: { 200: { description: 'ok' } }, auth: 'none' };

const handlers: Record<string, Handler> = {
  'sync-answer': (exchange) => {
    exchange.send(200, {}, 'now');
  },
  'async-answer': async (exchange) => {
    await new Promise((resolve) => setImmediate(resolve));
    exchange.send(200, {}, 'later');
  },
  'sync-throw': () => {
    throw BadRequest('thrown before returning');
  },
  'async-reject': async () => {
    await new Promise((resolve) => setImmediate(resolve));
    throw NotFound('rejected later');
  },
  'sync-unavailable': () => {
    throw Unavailable('the engine is restarting');
  },
  'sync-silent': () => undefined,
  'async-silent': async () => {
    await new Promise((resolve) => setImmediate(resolve));
  },
};

t.test('sync and async handlers are settled once, with their audit row', async (t) => {
  const audited: Array<{ op: string | undefined; status: number; open: boolean }> = [];
  const audit = {
    record: (exchange: Exchange) =>
      audited.push({ op: exchange.audit.action, status: exchange.status, open: exchange.open }),
  } as unknown as AuditSink;
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
    { host: '127.0.0.1', port: 0, sharedPort: false, audit },
    router,
    componentLogger('test'),
  );
  t.teardown(() => listener.close(0));
  const expected: Record<string, [number, RegExp]> = {
    'sync-answer': [200, /^now$/],
    'async-answer': [200, /^later$/],
    'sync-throw': [400, /"code":"bad_request".*thrown before returning/],
    'async-reject': [404, /"code":"not_found".*rejected later/],
    'sync-unavailable': [503, /"code":"unavailable"/],
    'sync-silent': [500, /"status":500/],
    'async-silent': [500, /"status":500/],
  };
  for (const [name, [status, body]] of Object.entries(expected)) {
    const response = await fetch(`http://127.0.0.1:${listener.port}/api/${name}`);
    t.equal(response.status, status, `${name}: status`);
    t.match(await response.text(), body, `${name}: body`);
    // Every 503 says when to try again; nothing else gets a Retry-After unasked.
    t.equal(
      response.headers.get('retry-after'),
      status === 503 ? '1' : null,
      `${name}: Retry-After`,
    );
  }
  await new Promise((resolve) => setTimeout(resolve, 20));
  t.same(
    audited,
    Object.entries(expected).map(([name, [status]]) => ({ op: name, status, open: false })),
    'one audit row per request, after its answer, in order',
  );
  // The prefix is whole segments: a path that only starts with its letters is no route of it.
  const beside = await fetch(`http://127.0.0.1:${listener.port}/apix/sync-answer`);
  t.equal(beside.status, 404, '/apix/… is not under /api');
  t.match(await beside.text(), /"code":"not_found"/);
});
