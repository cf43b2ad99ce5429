// Goal: the committed types of lightwell/client's native API (src/client/openapi-types.ts) are
// what openapi-typescript generates from the OpenAPI document the service serves, so the client
// cannot drift from the API.
// Method: `lightwell serve`, GET /api/v1/openapi.json, scripts/client-types.mjs's generator on
// it, compared with the committed file (regenerate: LIGHTWELL_UPDATE_CLIENT_TYPES=1 and this test).

import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Service } from '../helpers/service.js';
import { repoRoot } from '../golden/golden-dir.js';

interface Generator {
  clientTypes(document: unknown): Promise<string>;
}

t.test('the client types match the served OpenAPI document', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const served: unknown = await (await fetch(`${service.publicUrl}/openapi.json`)).json();
  const script = pathToFileURL(join(repoRoot(), 'scripts', 'client-types.mjs')).href;
  const generator = (await import(script)) as Generator;
  const file = join(repoRoot(), 'src', 'client', 'openapi-types.ts');
  const generated = await generator.clientTypes(served);
  // As the OpenAPI test: LIGHTWELL_UPDATE_CLIENT_TYPES=1 writes the file from the served document.
  if (process.env['LIGHTWELL_UPDATE_CLIENT_TYPES'] === '1') writeFileSync(file, generated);
  const committed = readFileSync(file, 'utf8');
  t.equal(
    generated,
    committed,
    'src/client/openapi-types.ts is current (LIGHTWELL_UPDATE_CLIENT_TYPES=1 regenerates it)',
  );
});
