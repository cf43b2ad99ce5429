// Goal: the schema-driven input checks. A JSON value with a field its schema does not declare is
// refused at any depth the schema describes (objects, arrays of objects, maps whose values are
// objects), with the path to the field; declared fields, open maps and values of the wrong type
// pass (their own validation answers those); `closedSchema` publishes the same rule; a
// state-changing operation refuses an undeclared query parameter, a read does not; a declared
// field that is null is refused unless its schema says `nullable: true`; a JSON text whose
// object names a field twice is found at any depth, names compared decoded, and strings that
// are values (in objects or arrays) are never taken for names; nesting deeper than
// JSON_DEPTH_MAX is refused.
// Method: the functions on hand-made schemas and values.
import t, { type Test } from 'tap';
import {
  closedSchema,
  jsonTextProblem,
  JSON_DEPTH_MAX,
  refuseUndeclaredFields,
  refuseUnclearQuery,
} from '../../src/http/strict-input.js';
import { errorCode } from '../../src/util/errors.js';
import type { JsonSchema, RouteDoc } from '../../src/http/router.js';

const str = { type: 'string' };
const schema: JsonSchema = {
  type: 'object',
  properties: {
    name: str,
    items: {
      type: 'array',
      items: { type: 'object', properties: { key: str, versionId: str } },
    },
    metadata: { type: 'object', additionalProperties: str },
    rules: {
      type: 'object',
      additionalProperties: { type: 'object', properties: { limit: { type: 'integer' } } },
    },
    open: { type: 'object', properties: { a: str }, additionalProperties: true },
  },
};

/** The message of the refusal (a `bad_request`), or undefined when the value passes. */
function refusal(value: unknown): string | undefined {
  try {
    refuseUndeclaredFields(value, schema);
    return undefined;
  } catch (error) {
    return errorCode(error) === 'bad_request' ? (error as Error).message : 'not a bad_request';
  }
}

t.test('declared fields pass, undeclared ones are named with their path', async (t) => {
  t.equal(refusal({ name: 'x', items: [{ key: 'k', versionId: 'v' }] }), undefined);
  t.equal(refusal({ metadata: { anything: 'goes' }, rules: { r1: { limit: 1 } } }), undefined);
  t.equal(refusal({ open: { a: 'x', b: 'y' } }), undefined, 'an open object takes any field');
  t.equal(refusal({ name: 5, items: 'not an array' }), undefined, 'types are checked elsewhere');
  t.equal(refusal(undefined), undefined);
  t.equal(refusal({ nmae: 'x' }), 'unknown field "nmae"');
  t.equal(
    refusal({ items: [{ key: 'a' }, { key: 'b', versionID: 'v' }] }),
    'items[1]: unknown field "versionID"',
  );
  t.equal(refusal({ rules: { r1: { limit: 1, limt: 2 } } }), 'rules.r1: unknown field "limt"');
  t.equal(refusal({ ['x'.repeat(500)]: 1 })?.length, 'unknown field ""'.length + 64);
});

t.test('null is refused unless the schema says nullable', async (t) => {
  const nullable: JsonSchema = {
    type: 'object',
    properties: { limit: { type: 'integer', nullable: true }, name: str, any: {} },
  };
  const refused = (value: unknown, against = schema): string | undefined => {
    try {
      refuseUndeclaredFields(value, against);
      return undefined;
    } catch (error) {
      return errorCode(error) === 'bad_request' ? (error as Error).message : 'not a bad_request';
    }
  };
  t.equal(refused({ name: null }), 'name must not be null: leave it out or give a string');
  t.equal(refused({ items: [null] }), 'items[0] must not be null: leave it out or give an object');
  t.equal(
    refused({ items: [{ key: 'k', versionId: null }] }),
    'items[0].versionId must not be null: leave it out or give a string',
  );
  t.equal(
    refused({ metadata: { m: null } }),
    'metadata.m must not be null: leave it out or give a string',
  );
  t.equal(
    refused({ metadata: { ['k'.repeat(500)]: null } }),
    `metadata.${'k'.repeat(64)} must not be null: leave it out or give a string`,
    'a map key is quoted at most 64 characters',
  );
  t.equal(refused({ limit: null, any: null }, nullable), undefined, 'nullable, or no type named');
  t.equal(
    refused({ name: null }, nullable),
    'name must not be null: leave it out or give a string',
  );
  t.equal(refused(null), undefined, "a body of null is the operation's to refuse");
});

t.test('the published schema closes what the check closes', async (t) => {
  const closed = closedSchema(schema);
  t.equal(closed['additionalProperties'], false);
  const properties = closed['properties'] as Record<string, Record<string, unknown>>;
  const items = properties['items']?.['items'] as Record<string, unknown>;
  t.equal(items['additionalProperties'], false, 'objects within arrays');
  t.same(properties['metadata'], { type: 'object', additionalProperties: str }, 'maps unchanged');
  t.equal(properties['open']?.['additionalProperties'], true, 'open objects stay open');
  t.notOk('additionalProperties' in schema, 'the declaration itself is not changed');
});

t.test('undeclared and repeated query parameters', async (t) => {
  const doc: RouteDoc = {
    summary: 's',
    auth: 'bearer',
    query: { dryRun: { type: 'boolean' } },
    responses: {},
  };
  const query = (text: string): URLSearchParams => new URLSearchParams(text);
  t.doesNotThrow(() => refuseUnclearQuery('POST', doc, query('dryRun=true')));
  t.throws(() => refuseUnclearQuery('POST', doc, query('dryrun=true')), {
    message: 'unknown query parameter "dryrun"',
  });
  t.throws(() => refuseUnclearQuery('DELETE', { ...doc, query: {} }, query('versionID=1')));
  t.doesNotThrow(() => refuseUnclearQuery('GET', doc, query('cachebust=1')));
  t.doesNotThrow(() => refuseUnclearQuery('HEAD', doc, query('x=1')));
  for (const method of ['POST', 'GET', 'HEAD']) {
    t.throws(() => refuseUnclearQuery(method, doc, query('dryRun=false&dryRun=true')), {
      message: 'query parameter "dryRun" is given more than once',
    });
  }
  t.doesNotThrow(() => refuseUnclearQuery('GET', doc, query('cachebust=1&cachebust=2')));
});

/** The message of what `jsonTextProblem` refuses in `text`, or undefined. */
function jsonRefusal(t: Test, text: string): string | undefined {
  JSON.parse(text); // every case is valid JSON, as the function requires
  const problem = jsonTextProblem(text);
  if (problem) t.equal(errorCode(problem), 'bad_request');
  return problem?.message;
}

t.test('fields given twice in a JSON text', async (t) => {
  const twice = (name: string): string => `the request body gives field "${name}" more than once`;
  const cases: Array<[text: string, duplicate: string | undefined]> = [
    ['{"a": 1, "b": 2}', undefined],
    ['{"a": 1, "a": 2}', 'a'],
    ['{"a":1,"b":{"c":1,"c":2}}', 'c'],
    ['{"a": {"x": 1}, "b": {"x": 1}}', undefined], // the same name in two objects
    ['[{"x": 1}, {"x": 2}]', undefined],
    ['{"items": [{"k": 1, "k": 2}]}', 'k'],
    ['{"a": "a", "b": "a"}', undefined], // values, not names
    ['["a", "a"]', undefined],
    ['{"a": ["b", "b"], "b": 1}', undefined],
    ['{"a\\u0022": 1, "b": "x\\"y", "c": 1}', undefined], // escapes inside strings
    ['{"\\u0061": 1, "a": 2}', 'a'], // compared decoded
    ['{"a" \n :1, "a"\t: 2}', 'a'], // whitespace before the colon
    ['{"a": "}", "a": 1}', 'a'], // brackets inside strings
    ['"a"', undefined],
    ['{}', undefined],
  ];
  for (const [text, duplicate] of cases)
    t.equal(jsonRefusal(t, text), duplicate === undefined ? undefined : twice(duplicate), text);
  const long = 'n'.repeat(500);
  t.equal(
    jsonRefusal(t, `{"${long}": 1, "${long}": 2}`),
    twice('n'.repeat(64)),
    'a long name is quoted in part',
  );
});

t.test('JSON nesting is bounded', async (t) => {
  const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
  t.equal(jsonRefusal(t, nested(JSON_DEPTH_MAX)), undefined, 'at the limit');
  const deeper = `the request body nests objects and arrays deeper than ${JSON_DEPTH_MAX} levels`;
  t.equal(jsonRefusal(t, nested(JSON_DEPTH_MAX + 1)), deeper, 'one level more');
  t.equal(jsonRefusal(t, `{"parts": ${nested(5000)}}`), deeper, 'far deeper');
  const objects = (depth: number): string => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
  t.equal(jsonRefusal(t, objects(JSON_DEPTH_MAX)), undefined);
  t.equal(jsonRefusal(t, objects(JSON_DEPTH_MAX + 1)), deeper, 'objects count as arrays do');
  t.equal(
    jsonRefusal(t, `[${nested(JSON_DEPTH_MAX - 1)}, ${nested(JSON_DEPTH_MAX - 1)}]`),
    undefined,
  );
  t.equal(
    jsonRefusal(t, '["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]'),
    undefined,
    'brackets in strings',
  );
});
