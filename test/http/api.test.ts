// Goal: one listener serves several APIs, each answering in its own form: a request goes to the
// API whose prefix holds its path (whole segments, the longest), else to the API of every other
// path; each API's errors are rendered by its own renderer from the one error table (status and
// headers the same in every form), and only a strict API refuses an undeclared query parameter
// of a state-changing operation. Without an API of every other path, such a path is a 404
// problem, as before APIs were mounted.
// Method: `listen` on loopback with a routed API, a nested one, and a plain-text "other paths"
// API; plain fetch requests.
import t from 'tap';
import { Mounts, routedApi, unmountedApi, type Api } from '../../src/http/api.js';
import type { ErrorRenderer } from '../../src/http/error-answer.js';
import { Router, type RouteDoc } from '../../src/http/router.js';
import { listen, type Handler } from '../../src/http/server.js';
import { componentLogger } from '../../src/util/log.js';
import { MethodNotAllowed, NotFound } from '../../src/util/errors.js';

const DOC: RouteDoc = { summary: 'test', responses: { 200: { description: 'ok' } }, auth: 'none' };

const plainText: ErrorRenderer = {
  render: (answer, request) => ({
    status: answer.status,
    headers: { ...answer.headers, 'Content-Type': 'text/plain' },
    body: `${answer.code} at ${request.path} (${request.requestId})`,
  }),
};

function otherPaths(): Api {
  return {
    name: 'other',
    prefix: '',
    errors: plainText,
    strictQuery: false,
    dispatch: (exchange) => {
      if (exchange.path === '/bucket/key' && exchange.method === 'PUT')
        return {
          operationId: 'otherPut',
          handler: (ex) => ex.send(200, {}, `put ${ex.rawQuery}`),
          params: {},
        };
      if (exchange.path === '/bucket/key') throw MethodNotAllowed('only PUT', { allow: 'PUT' });
      throw NotFound(`nothing at ${exchange.path}`);
    },
  };
}

const put: Handler = (exchange) => {
  exchange.refuseUnclearQuery();
  exchange.send(200, {}, 'native');
};

t.test('each request goes to its API and is answered in its form', async (t) => {
  const native = routedApi({
    router: new Router('/api/v1', [
      { method: 'PUT', path: '/thing', operationId: 'putThing', doc: DOC, handler: put },
    ]),
  });
  const nested = routedApi({
    router: new Router('/api/v1/inner', [
      {
        method: 'GET',
        path: '/x',
        operationId: 'innerX',
        doc: DOC,
        handler: (exchange) => exchange.send(200, {}, 'inner'),
      },
    ]),
  });
  const listener = await listen(
    { host: '127.0.0.1', port: 0, sharedPort: false },
    [native, otherPaths(), nested],
    componentLogger('test'),
  );
  t.teardown(() => listener.close(0));
  const base = `http://127.0.0.1:${listener.port}`;

  const ok = await fetch(`${base}/api/v1/thing`, { method: 'PUT' });
  t.equal(await ok.text(), 'native');
  const inner = await fetch(`${base}/api/v1/inner/x`);
  t.equal(await inner.text(), 'inner', 'the longest prefix wins');

  const strict = await fetch(`${base}/api/v1/thing?x-id=PutObject`, { method: 'PUT' });
  t.equal(strict.status, 400, 'the native API refuses an undeclared parameter of a PUT');
  t.equal(strict.headers.get('content-type'), 'application/problem+json');
  t.match(await strict.text(), /"code":"bad_request"/);

  const lax = await fetch(`${base}/bucket/key?x-id=PutObject`, { method: 'PUT' });
  t.equal(await lax.text(), 'put x-id=PutObject', 'the other API takes what it does not know');

  const missing = await fetch(`${base}/api/v1/none`);
  t.equal(missing.status, 404);
  t.equal(missing.headers.get('content-type'), 'application/problem+json');

  const beside = await fetch(`${base}/api/v1x/thing`);
  t.equal(beside.status, 404, '/api/v1x is not under /api/v1');
  t.equal(beside.headers.get('content-type'), 'text/plain');
  t.match(await beside.text(), /^not_found at \/api\/v1x\/thing \(\S+\)$/);

  const wrong = await fetch(`${base}/bucket/key`);
  t.equal(wrong.status, 405);
  t.equal(wrong.headers.get('allow'), 'PUT', 'the table adds the headers in every form');
  t.equal(wrong.headers.get('content-type'), 'text/plain');
});

t.test('without an API of every other path, other paths are a 404 problem', async (t) => {
  const listener = await listen(
    { host: '127.0.0.1', port: 0, sharedPort: false },
    [routedApi({ router: new Router('/api/v1', []) })],
    componentLogger('test'),
  );
  t.teardown(() => listener.close(0));
  const response = await fetch(`http://127.0.0.1:${listener.port}/bucket/key`);
  t.equal(response.status, 404);
  t.equal(response.headers.get('content-type'), 'application/problem+json');
  t.match(await response.json(), { code: 'not_found', message: 'no route for /bucket/key' });
});

t.test('prefixes are whole segments and mounted once', async (t) => {
  const at = (prefix: string): Api => unmountedApi({ prefix });
  t.throws(() => new Mounts([at('/a'), at('/a')]), /two APIs/);
  t.throws(() => new Mounts([at('/a/')]), /whole path segments/);
  t.throws(() => new Mounts([at('a')]), /whole path segments/);
  const a = at('/a');
  const mounts = new Mounts([a]);
  t.equal(mounts.apiOf('/a'), a);
  t.equal(mounts.apiOf('/a/b'), a);
  t.not(mounts.apiOf('/ab'), a);
});
