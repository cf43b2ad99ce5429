// Goal: docs/errors.md documents exactly the codes of the error catalogue, with their statuses.
// Method: parse the table and compare it with errorCatalogue() both ways.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { errorCatalogue, HeadersTooLarge, LengthRequired } from '../../src/util/errors.js';
import { toProblem } from '../../src/http/error-answer.js';

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

// The stable codes of spec/DECISIONS.md ("Status codes and problem codes"): the only codes a
// client may see. The storage layers' own codes reach clients as internal or unavailable.
const PUBLIC_CODES = new Set([
  'bad_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'method_not_allowed',
  'conflict',
  'bucket_not_empty',
  'precondition_failed',
  'invalid_range',
  'checksum_mismatch',
  'idempotency_key_reused',
  'idempotency_key_in_use',
  'payload_too_large',
  'rate_limited',
  'quota_exceeded',
  'not_implemented',
  'tls_required',
  'internal',
  'unavailable',
]);

t.test('every code a client can see is a stable code of the contract', async (t) => {
  for (const spec of errorCatalogue()) {
    const seen = toProblem(spec('probe')).code;
    t.ok(PUBLIC_CODES.has(seen), `${spec.code} reaches a client as ${seen}`);
  }
  for (const error of [LengthRequired('probe'), HeadersTooLarge('probe')]) {
    const problem = toProblem(error);
    t.same([problem.code, problem.status], ['bad_request', error.status]);
  }
  t.same([LengthRequired().status, HeadersTooLarge().status], [411, 431]);
});
