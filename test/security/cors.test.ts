// Goal: the CORS validator accepts the spec's shape and refuses everything else with
// bad_request (methods outside GET/HEAD/PUT/POST/DELETE, origins or headers with more than
// one wildcard, wildcards in expose headers, unknown fields), and matching grants headers
// only when origin, method and every requested header match one rule.
// Method: direct calls; errors are matched on their code.
import t from 'tap';
import {
  parseCorsConfiguration,
  matchCorsRule,
  preflightHeaders,
  corsResponseHeaders,
  parseRequestHeaderList,
  wildcardMatches,
} from '../../src/security/cors.js';
import { errorCode } from '../../src/util/errors.js';

const rule = {
  allowedOrigins: ['https://*.example.com', 'http://localhost:3000'],
  allowedMethods: ['GET', 'PUT'],
  allowedHeaders: ['Content-Type', 'x-service-*'],
  exposeHeaders: ['ETag'],
  maxAgeSeconds: 600,
};

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    return errorCode(error) ?? 'not a LightwellError';
  }
}

t.test('valid configurations are normalised', async (t) => {
  const parsed = parseCorsConfiguration({
    rules: [rule, { id: 'any', allowedOrigins: ['*'], allowedMethods: ['HEAD', 'POST', 'DELETE'] }],
  });
  t.equal(parsed.rules.length, 2);
  t.same(parsed.rules[1], {
    id: 'any',
    allowedOrigins: ['*'],
    allowedMethods: ['HEAD', 'POST', 'DELETE'],
    allowedHeaders: [],
    exposeHeaders: [],
  });
  t.same(parsed.rules[0], rule);
});

t.test('invalid configurations are bad_request', async (t) => {
  const bad: Array<[unknown, string]> = [
    [undefined, 'no body'],
    [{ rules: [] }, 'no rules'],
    [{ rules: [rule], extra: 1 }, 'unknown top-level field'],
    [{ rules: [{ ...rule, allowedMethods: ['PATCH'] }] }, 'PATCH'],
    [{ rules: [{ ...rule, allowedMethods: ['get'] }] }, 'lower-case method'],
    [{ rules: [{ ...rule, allowedMethods: [] }] }, 'no methods'],
    [
      { rules: [{ ...rule, allowedOrigins: ['https://*.*.example.com'] }] },
      'two wildcards in an origin',
    ],
    [{ rules: [{ ...rule, allowedOrigins: [] }] }, 'no origins'],
    [{ rules: [{ ...rule, allowedOrigins: ['https://a.com\r\nX: y'] }] }, 'control characters'],
    [{ rules: [{ ...rule, allowedHeaders: ['x-*-*'] }] }, 'two wildcards in a header'],
    [{ rules: [{ ...rule, exposeHeaders: ['x-*'] }] }, 'a wildcard in an expose header'],
    [{ rules: [{ ...rule, maxAgeSeconds: -1 }] }, 'negative max age'],
    [{ rules: [{ ...rule, maxAgeSeconds: 1.5 }] }, 'fractional max age'],
    [{ rules: [{ ...rule, other: true }] }, 'unknown rule field'],
    [
      {
        rules: [
          { ...rule, id: 'a' },
          { ...rule, id: 'a' },
        ],
      },
      'duplicate ids',
    ],
    [{ rules: Array.from({ length: 101 }, () => rule) }, 'too many rules'],
    [{ rules: [{ ...rule, allowedMethods: ['GET', 'GET'] }] }, 'a method twice'],
  ];
  for (const [value, why] of bad)
    t.equal(
      codeOf(() => parseCorsConfiguration(value)),
      'bad_request',
      why,
    );
});

t.test('wildcards match any run of characters, once', async (t) => {
  t.ok(wildcardMatches('https://*.example.com', 'https://app.example.com'));
  t.ok(wildcardMatches('https://*.example.com', 'https://a.b.example.com'));
  t.notOk(wildcardMatches('https://*.example.com', 'https://example.com'));
  t.notOk(wildcardMatches('https://*.example.com', 'https://evil.com/.example.com.evil'));
  t.ok(wildcardMatches('*', 'null'));
  t.notOk(wildcardMatches('http://localhost:3000', 'http://localhost:3001'));
});

t.test('matching needs origin, method and every requested header', async (t) => {
  const { rules } = parseCorsConfiguration({ rules: [rule] });
  const ok = {
    origin: 'https://app.example.com',
    method: 'PUT',
    headers: parseRequestHeaderList('Content-Type, X-Service-Checksum-SHA256'),
  };
  const matched = matchCorsRule(rules, ok);
  t.ok(matched);
  t.notOk(matchCorsRule(rules, { ...ok, origin: 'https://evil.com' }), 'origin');
  t.notOk(matchCorsRule(rules, { ...ok, method: 'DELETE' }), 'method');
  t.notOk(matchCorsRule(rules, { ...ok, headers: ['authorization'] }), 'header');
  t.notOk(matchCorsRule(undefined, ok), 'no rules');
  t.same(preflightHeaders(matched!, ok), {
    'Access-Control-Allow-Origin': 'https://app.example.com',
    'Access-Control-Allow-Methods': 'GET, PUT',
    'Access-Control-Allow-Headers': 'content-type, x-service-checksum-sha256',
    'Access-Control-Max-Age': '600',
    'Access-Control-Expose-Headers': 'ETag',
    Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
  });
  t.same(corsResponseHeaders(matched!, 'https://app.example.com'), {
    'Access-Control-Allow-Origin': 'https://app.example.com',
    Vary: 'Origin',
    'Access-Control-Expose-Headers': 'ETag',
  });
});
