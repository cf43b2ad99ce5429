// Goal: docs/errors.md documents exactly the codes of the error catalogue, with their statuses.
// Method: parse the table and compare it with errorCatalogue() both ways.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { errorCatalogue } from '../../src/util/errors.js';

const doc = readFileSync(
  fileURLToPath(new URL('../../../docs/errors.md', import.meta.url)),
  'utf8',
);
const rows = new Map<string, number>();
for (const line of doc.split('\n')) {
  const match = /^\| ([a-z_]+) \| (\d{3}) \|/.exec(line);
  if (match) rows.set(match[1] as string, Number(match[2]));
}

t.test('every catalogue code is documented with its status', async (t) => {
  for (const spec of errorCatalogue()) t.equal(rows.get(spec.code), spec.status, spec.code);
});

t.test('every documented code exists', async (t) => {
  const codes = new Set(errorCatalogue().map((spec) => spec.code));
  for (const code of rows.keys()) t.ok(codes.has(code), code);
});
