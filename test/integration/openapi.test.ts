// Goal: the served OpenAPI documents are the contract: every endpoint of spec/data-api.md §4 and
// spec/admin-api.md §4 is in them with its method (and HEAD wherever GET is, since the router
// answers it), every operationId is unique (and the spec's example ids exist), every operation
// documents the problem object (and every operation that authenticates lists 401 and 403
// itself), and the copies committed in docs/openapi/ match what the service serves (regenerate
// them with LIGHTWELL_UPDATE_OPENAPI=1); what every operation answers to a path parameter that
// is not UTF-8, and a read to a boolean or integer query parameter of another value, is a status
// the operation declares.
// Method: start the real service, fetch both documents unauthenticated, compare; then walk every
// operation of both with those malformed requests.
import t, { type Test } from 'tap';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Service } from '../helpers/service.js';

const docsDir = fileURLToPath(new URL('../../../docs/openapi/', import.meta.url));

const dataEndpoints = [
  'GET /healthz',
  'GET /readyz',
  'GET /openapi.json',
  'POST /auth/token',
  'POST /sign-url',
  'GET /signed/{bucket}/{key}',
  'PUT /signed/{bucket}/{key}',
  'OPTIONS /signed/{bucket}/{key}',
  'GET /buckets',
  'POST /buckets',
  'GET /buckets/{bucket}',
  'DELETE /buckets/{bucket}',
  'GET /buckets/{bucket}/versioning',
  'PUT /buckets/{bucket}/versioning',
  'GET /buckets/{bucket}/cors',
  'PUT /buckets/{bucket}/cors',
  'DELETE /buckets/{bucket}/cors',
  'GET /buckets/{bucket}/notifications',
  'PUT /buckets/{bucket}/notifications',
  'DELETE /buckets/{bucket}/notifications',
  'PUT /buckets/{bucket}/objects/{key}',
  'GET /buckets/{bucket}/objects/{key}',
  'HEAD /buckets/{bucket}/objects/{key}',
  'DELETE /buckets/{bucket}/objects/{key}',
  'GET /buckets/{bucket}/objects',
  'POST /buckets/{bucket}/objects:batchDelete',
  'POST /buckets/{bucket}/object-copy/{key}',
  'GET /buckets/{bucket}/versions',
  'GET /buckets/{bucket}/object-tags/{key}',
  'PUT /buckets/{bucket}/object-tags/{key}',
  'DELETE /buckets/{bucket}/object-tags/{key}',
  'GET /buckets/{bucket}/object-retention/{key}',
  'PUT /buckets/{bucket}/object-retention/{key}',
  'GET /buckets/{bucket}/object-legal-hold/{key}',
  'PUT /buckets/{bucket}/object-legal-hold/{key}',
  'POST /buckets/{bucket}/multipart/{key}',
  'PUT /buckets/{bucket}/multipart/{uploadId}/parts/{partNumber}/{key}',
  'GET /buckets/{bucket}/multipart/{uploadId}/parts/{key}',
  'POST /buckets/{bucket}/multipart/{uploadId}/complete/{key}',
  'DELETE /buckets/{bucket}/multipart/{uploadId}/{key}',
  'GET /buckets/{bucket}/multipart',
];

const adminEndpoints = [
  'GET /healthz',
  'GET /readyz',
  'GET /openapi.json',
  'GET /tenants',
  'POST /tenants',
  'GET /tenants/{id}',
  'POST /tenants/{id}/disable',
  'POST /tenants/{id}/delete',
  'GET /tenants/{id}/accounts',
  'POST /tenants/{id}/accounts',
  'GET /tenants/{id}/keys',
  'POST /tenants/{id}/keys',
  'POST /tenants/{id}/keys/{keyId}/rotate',
  'POST /tenants/{id}/keys/{keyId}/revoke',
  'GET /tenants/{id}/quota',
  'PUT /tenants/{id}/quota',
  'DELETE /tenants/{id}/quota',
  'GET /tenants/{id}/usage',
  'GET /audit',
  'GET /cluster/consensus/membership',
  'POST /cluster/consensus/join',
  'POST /cluster/consensus/drain',
  'POST /cluster/consensus/remove',
  'POST /cluster/consensus/replace',
  'POST /cluster/repair/rebalance',
];

type Operation = {
  operationId: string;
  responses: Record<string, unknown>;
  security?: Array<Record<string, unknown>>;
  parameters?: Array<{ name: string; in: string; schema: { type?: string } }>;
};
type OpenApi = {
  openapi: string;
  servers: Array<{ url: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown> };
};

function operations(doc: OpenApi): Map<string, Operation> {
  const found = new Map<string, Operation>();
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(methods))
      found.set(`${method.toUpperCase()} ${path}`, operation);
  }
  return found;
}

function check(
  t: Test,
  doc: OpenApi,
  prefix: string,
  endpoints: readonly string[],
  ids: readonly string[],
  file: string,
): void {
  t.match(doc.openapi, /^3\./, 'OpenAPI 3');
  // Paths relative to the API's prefix, which is the server, as the specs write them.
  t.same(doc.servers, [{ url: prefix }], `${file}: the server is ${prefix}`);
  const found = operations(doc);
  for (const endpoint of endpoints) t.ok(found.has(endpoint), `${file}: ${endpoint} is documented`);
  const operationIds = [...found.values()].map((operation) => operation.operationId);
  t.equal(new Set(operationIds).size, operationIds.length, `${file}: operationIds are unique`);
  for (const id of ids) t.ok(operationIds.includes(id), `${file}: operationId ${id}`);
  // The service answers HEAD wherever it answers GET, so the document says so too: with the
  // GET's statuses and security, and no content in any answer (a HEAD's problems have none).
  for (const [endpoint, get] of found) {
    if (!endpoint.startsWith('GET ')) continue;
    const head = found.get(`HEAD ${endpoint.slice(4)}`);
    t.ok(head, `${file}: ${endpoint} has its HEAD`);
    if (!head) continue;
    t.same(Object.keys(head.responses), Object.keys(get.responses), `${file}: its statuses`);
    t.same(head.security, get.security, `${file}: its security`);
    t.notOk(
      Object.values(head.responses).some((response) => 'content' in (response as object)),
      `${file}: HEAD ${endpoint.slice(4)} answers without content`,
    );
  }
  for (const [endpoint, operation] of found) {
    t.ok(operation.responses['default'], `${file}: ${endpoint} documents the problem object`);
    // Every operation says how it authenticates, with schemes the document declares.
    t.ok(operation.security, `${file}: ${endpoint} names its security`);
    for (const requirement of operation.security ?? [])
      for (const scheme of Object.keys(requirement))
        t.ok(doc.components.securitySchemes[scheme], `${file}: ${endpoint} scheme ${scheme}`);
    if (endpoint.includes(' /signed/'))
      t.same(operation.security, [{ signedUrl: [] }], `${file}: ${endpoint} takes the URL token`);
    // An operation that authenticates names the refusals it can give, not only `default`.
    const probe = endpoint.includes('healthz') || endpoint.includes('readyz');
    if (probe || endpoint.includes('openapi.json')) continue;
    for (const status of ['401', '403'])
      t.ok(operation.responses[status], `${file}: ${endpoint} lists ${status}`);
  }
  const text = `${JSON.stringify(doc, null, 2)}\n`;
  if (process.env['LIGHTWELL_UPDATE_OPENAPI'] === '1') {
    mkdirSync(docsDir, { recursive: true });
    writeFileSync(docsDir + file, text);
  }
  t.equal(
    readFileSync(docsDir + file, 'utf8'),
    text,
    `docs/openapi/${file} matches the served document`,
  );
}

t.test('served OpenAPI documents are the contract', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const data = (await (await fetch(`${service.publicUrl}/openapi.json`)).json()) as OpenApi;
  check(
    t,
    data,
    '/api/v1',
    dataEndpoints,
    ['putObject', 'listObjects', 'signURL', 'setBucketNotifications'],
    'data-api.json',
  );
  const admin = (await (await fetch(`${service.adminUrl}/openapi.json`)).json()) as OpenApi;
  check(
    t,
    admin,
    '/admin/api/v1',
    adminEndpoints,
    ['listTenants', 'createTenantKey', 'queryAuditLog'],
    'admin-api.json',
  );
  const adminOnPublic = await fetch(
    `${service.publicUrl.replace('/api/v1', '/admin/api/v1')}/tenants`,
  );
  t.equal(adminOnPublic.status, 404, 'the public listener never serves the admin API');
  t.match(await adminOnPublic.text(), /<Code>NoSuchBucket<\/Code>/, 'there it is an S3 path');
  t.equal(
    (await fetch(`${service.adminUrl.replace('/admin/api/v1', '/api/v1')}/buckets`)).status,
    404,
    'the admin listener never serves the data plane',
  );
});

/** Real values for the path parameters of the walk below (a bucket and tenant that exist). */
const pathValues: Record<string, string> = {
  bucket: 'walk',
  key: 'k',
  id: 'walk',
  keyId: 'x',
  uploadId: 'x',
  partNumber: '1',
};

t.test('what the service answers to malformed input, every operation declares', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const owner = service.adminToken();
  const client = await service.tenant('walk');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'walk' } })).status, 201);
  const planes = [
    {
      url: service.publicUrl,
      send: async (method: string, path: string): Promise<number> =>
        (await client.request(method, path)).status,
    },
    {
      url: service.adminUrl,
      send: async (method: string, path: string): Promise<number> =>
        (await service.admin(method, path, owner)).status,
    },
  ];
  for (const plane of planes) {
    const doc = (await (await fetch(`${plane.url}/openapi.json`)).json()) as OpenApi;
    for (const [endpoint, operation] of operations(doc)) {
      const [method = '', path = ''] = endpoint.split(' ');
      const declared = (status: number): boolean => String(status) in operation.responses;
      // A path parameter that is not UTF-8 once decoded: the router's 400, before any handler.
      if (path.includes('{')) {
        const status = await plane.send(method, path.replace(/\{\w+\}/g, '%ff'));
        t.ok(declared(status), `${endpoint} with %ff: ${status} is declared`);
      }
      // A read's typed query parameter with a value of another type.
      if (method !== 'GET') continue;
      const filled = path.replace(/\{(\w+)\}/g, (_, name: string) => pathValues[name] ?? 'x');
      for (const parameter of operation.parameters ?? []) {
        const type = parameter.schema.type;
        if (parameter.in !== 'query' || (type !== 'boolean' && type !== 'integer')) continue;
        const status = await plane.send(method, `${filled}?${parameter.name}=maybe`);
        t.ok(declared(status), `${endpoint}?${parameter.name}=maybe: ${status} is declared`);
      }
    }
  }
});
