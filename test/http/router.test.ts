// Goal: the router finds the operation a method and raw path name, decodes each parameter once,
// and tells an unknown path (404) from a known path asked with another method (405, with the
// methods it allows). Matching looks only at the request method's own routes first; these cases
// pin down that it answers what a scan of every route in declaration order answered, but for
// one thing: a malformed percent-escape in a path that no route fits is a 404, not a 400 (the
// scan decoded parameters before it compared the rest of the path).
import t from 'tap';
import { Router, type Method, type RouteDoc } from '../../src/http/router.js';
import { isLightwellError } from '../../src/util/errors.js';

const DOC: RouteDoc = { summary: 'test', responses: { 200: { description: 'ok' } }, auth: 'none' };

const table: Array<[Method, string, string]> = [
  ['GET', '/buckets', 'listBuckets'],
  ['POST', '/buckets', 'createBucket'],
  ['GET', '/buckets/{bucket}', 'getBucket'],
  ['DELETE', '/buckets/{bucket}', 'deleteBucket'],
  ['GET', '/buckets/{bucket}/cors', 'getCors'],
  ['POST', '/buckets/{bucket}/objects:batchDelete', 'batchDelete'],
  ['GET', '/buckets/{bucket}/objects/{key...}', 'getObject'],
  ['HEAD', '/buckets/{bucket}/objects/{key...}', 'headObject'],
  ['PUT', '/buckets/{bucket}/objects/{key...}', 'putObject'],
  ['GET', '/buckets/{bucket}/{rest...}', 'catchAll'],
  ['GET', '/tenants/{tenant}/keys', 'listKeys'],
];

const router = new Router<string>(
  '/api/v1',
  table.map(([method, path, operationId]) => ({
    method,
    path,
    operationId,
    doc: DOC,
    handler: operationId,
  })),
);

function errorOf(run: () => unknown): { code: string; status: number; allow?: unknown } {
  try {
    run();
  } catch (error) {
    if (!isLightwellError(error)) throw error;
    return { code: error.code, status: error.status, allow: error.details['allow'] };
  }
  throw new TypeError('expected a refusal');
}

t.test('literals, parameters and the rest of the path', async (t) => {
  t.same(router.match('GET', '/api/v1/buckets').route.operationId, 'listBuckets');
  const bucket = router.match('GET', '/api/v1/buckets/b%2D1');
  t.same([bucket.route.operationId, bucket.params], ['getBucket', { bucket: 'b-1' }]);
  const object = router.match('GET', '/api/v1/buckets/b1/objects/a/b%20c//d');
  t.same(object.params, { bucket: 'b1', key: 'a/b c//d' }, 'slashes kept, decoded once');
  t.same(router.match('GET', '/api/v1/buckets/b1/objects/%2Fx').params, {
    bucket: 'b1',
    key: '/x',
  });
  t.same(router.match('GET', '/api/v1/buckets/b1/objects//').params['key'], '/');
  const batch = router.match('POST', '/api/v1/buckets/b1/objects:batchDelete');
  t.equal(batch.route.operationId, 'batchDelete');
});

t.test('the first declared route of the method wins', async (t) => {
  t.equal(router.match('GET', '/api/v1/buckets/b1/cors').route.operationId, 'getCors');
  t.equal(router.match('GET', '/api/v1/buckets/b1/objects/k').route.operationId, 'getObject');
  t.equal(router.match('GET', '/api/v1/buckets/b1/other/x').route.operationId, 'catchAll');
});

t.test('HEAD has its own route where one is declared, else the GET one', async (t) => {
  t.equal(router.match('HEAD', '/api/v1/buckets/b1/objects/k').route.operationId, 'headObject');
  t.equal(router.match('HEAD', '/api/v1/buckets/b1').route.operationId, 'getBucket');
});

t.test('an empty parameter or rest matches nothing', async (t) => {
  t.match(
    errorOf(() => router.match('GET', '/api/v1/buckets/')),
    { status: 404 },
  );
  t.match(
    errorOf(() => router.match('DELETE', '/api/v1/buckets/')),
    { status: 404 },
  );
  // `objects/` with nothing after it: the object route has no key, the catch-all takes it.
  const bare = router.match('GET', '/api/v1/buckets/b1/objects/');
  t.same([bare.route.operationId, bare.params['rest']], ['catchAll', 'objects/']);
  t.match(
    errorOf(() => router.match('PUT', '/api/v1/buckets/b1/objects/')),
    { status: 405 },
  );
});

t.test('405 names the allowed methods; 404 for unknown paths', async (t) => {
  t.same(
    errorOf(() => router.match('PUT', '/api/v1/buckets')),
    {
      code: 'method_not_allowed',
      status: 405,
      allow: 'GET, POST, HEAD',
    },
  );
  t.same(errorOf(() => router.match('POST', '/api/v1/buckets/b1')).allow, 'GET, DELETE, HEAD');
  t.match(
    errorOf(() => router.match('GET', '/api/v1/nothing')),
    { status: 404 },
  );
  t.match(
    errorOf(() => router.match('GET', '/api/v1x/buckets')),
    { status: 404 },
    'prefix',
  );
  t.match(
    errorOf(() => router.match('GET', '/other')),
    { status: 404 },
  );
});

t.test('malformed paths are refused', async (t) => {
  t.match(
    errorOf(() => router.match('GET', '/api/v1/buckets/b1/objects/%ZZ')),
    {
      code: 'bad_request',
      status: 400,
    },
  );
  t.match(
    errorOf(() => router.match('GET', '/api/v1/buckets/b\uFFFD')),
    { status: 400 },
  );
  // A bad escape where a parameter would be, on a path that no route fits: no such route.
  t.match(
    errorOf(() => router.match('GET', '/api/v1/tenants/%ZZ/other')),
    { status: 404 },
  );
  t.match(
    errorOf(() => router.match('GET', '/api/v1/buckets/%ZZ')),
    { status: 400 },
  );
});
