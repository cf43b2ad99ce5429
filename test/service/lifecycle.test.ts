// Goal: the lifecycle rule model's validation answers S3's error class for each malformed or
// invalid configuration, keeps what it accepts exactly (the form of a filter, the numbers), and
// the rule evaluation computes S3's times: the next midnight UTC after creation plus the days,
// a Date as given, and the `x-amz-expiration` value.
// Method: the service's and the engine's pure functions on literal inputs.
import t from 'tap';
import {
  expirationOf,
  lifecycleDateOf,
  validateLifecycle,
  type LifecycleRuleInput,
} from '../../src/service/lifecycle.js';
import {
  currentExpiry,
  filterCovers,
  nextMidnight,
  DAY_MS,
} from '../../src/engine/lifecycle-rules.js';
import type { ObjectVersionRecord } from '../../src/engine/index/schema.js';
import { loadSettings } from '../../src/util/config.js';

function reasonOf(rules: LifecycleRuleInput[]): string {
  try {
    validateLifecycle(rules);
  } catch (error) {
    return String((error as { details?: { reason?: unknown } }).details?.reason);
  }
  return 'accepted';
}

const expire = { expiration: { days: '1' } };

t.test('refusals by class', async (t) => {
  const cases: Array<[string, LifecycleRuleInput[], string]> = [
    ['no rule', [], 'malformed'],
    ['status', [{ status: 'enabled', prefix: '', ...expire }], 'malformed'],
    [
      'filter and prefix',
      [{ status: 'Enabled', prefix: '', filter: { predicates: 0 }, ...expire }],
      'malformed',
    ],
    [
      'two predicates without And',
      [{ status: 'Enabled', filter: { predicates: 2, prefix: 'a', sizeLessThan: '5' }, ...expire }],
      'malformed',
    ],
    [
      'And of one',
      [
        {
          status: 'Enabled',
          filter: { predicates: 1, and: { predicates: 1, prefix: 'a' } },
          ...expire,
        },
      ],
      'malformed',
    ],
    ['empty expiration', [{ status: 'Enabled', prefix: '', expiration: {} }], 'malformed'],
    [
      'marker not boolean',
      [{ status: 'Enabled', prefix: '', expiration: { expiredObjectDeleteMarker: 'yes' } }],
      'malformed',
    ],
    [
      'days of text',
      [{ status: 'Enabled', prefix: '', expiration: { days: 'ten' } }],
      'invalid_argument',
    ],
    [
      'negative days',
      [{ status: 'Enabled', prefix: '', expiration: { days: '-1' } }],
      'invalid_argument',
    ],
    [
      'date with time',
      [{ status: 'Enabled', prefix: '', expiration: { date: '2030-01-01T00:00:01Z' } }],
      'invalid_argument',
    ],
    [
      'no calendar date',
      [{ status: 'Enabled', prefix: '', expiration: { date: '2030-02-30' } }],
      'invalid_argument',
    ],
    [
      'duplicate tag keys',
      [
        {
          status: 'Enabled',
          filter: {
            predicates: 1,
            and: {
              predicates: 2,
              tags: [
                { key: 'a', value: '1' },
                { key: 'a', value: '2' },
              ],
            },
          },
          ...expire,
        },
      ],
      'invalid_request',
    ],
    ['no action', [{ status: 'Enabled', prefix: '' }], 'invalid_request'],
    [
      'marker with a tag',
      [
        {
          status: 'Enabled',
          filter: { predicates: 1, tags: [{ key: 'a', value: '' }] },
          expiration: { expiredObjectDeleteMarker: 'true' },
        },
      ],
      'invalid_request',
    ],
    [
      'transition',
      [{ status: 'Enabled', prefix: '', transitions: [{ days: '30' }] }],
      'not_implemented',
    ],
    [
      'transition with a bad date',
      [{ status: 'Enabled', prefix: '', transitions: [{ date: '2030-01-01T10:00:00Z' }] }],
      'invalid_argument',
    ],
  ];
  for (const [what, rules, reason] of cases) t.equal(reasonOf(rules), reason, what);
});

t.test('what is accepted is kept as written', async (t) => {
  const [rule] = validateLifecycle([
    {
      id: 'r',
      status: 'Disabled',
      filter: {
        predicates: 1,
        and: { predicates: 3, prefix: '', tags: [{ key: 'k', value: 'v' }], sizeGreaterThan: '0' },
      },
      expiration: { date: '2030-01-01T00:00:00.000Z' },
      noncurrentExpiration: { noncurrentDays: 3, newerNoncurrentVersions: '100' },
    },
  ]);
  t.same(rule, {
    id: 'r',
    status: 'Disabled',
    filter: { form: 'and', prefix: '', tags: [{ key: 'k', value: 'v' }], sizeGreaterThan: 0 },
    expiration: { date: Date.UTC(2030, 0, 1) },
    noncurrentExpiration: { noncurrentDays: 3, newerNoncurrentVersions: 100 },
  });
  t.equal(lifecycleDateOf('2030-01-01'), Date.UTC(2030, 0, 1));
});

t.test("S3's times and the header", async (t) => {
  const created = Date.UTC(2014, 0, 15, 10, 30);
  // AWS's own example: created 15 January 10:30 UTC, 3 days: expires 19 January 00:00 UTC.
  t.equal(nextMidnight(created + 3 * DAY_MS, DAY_MS), Date.UTC(2014, 0, 19));
  t.equal(nextMidnight(Date.UTC(2014, 0, 19), DAY_MS), Date.UTC(2014, 0, 19), 'midnight stays');
  const [rule] = validateLifecycle([{ id: 'pic"s', status: 'Enabled', prefix: 'p/', ...expire }]);
  const version = { key: 'p/a', size: 1, lastModified: created } as ObjectVersionRecord;
  t.same(currentExpiry([rule!], version, DAY_MS)?.due, Date.UTC(2014, 0, 17));
  t.equal(
    expirationOf({ lifecycle: [rule!] }, version, loadSettings({})),
    'expiry-date="Fri, 17 Jan 2014 00:00:00 GMT", rule-id="pic\\"s"',
  );
  t.equal(
    expirationOf({ lifecycle: [rule!] }, { ...version, key: 'q' }, loadSettings({})),
    undefined,
  );
  t.notOk(
    filterCovers(
      { id: 'x', status: 'Enabled', filter: { form: 'filter', sizeLessThan: 10 } },
      { key: 'marker' },
    ),
    'a size filter never covers what has no size (a delete marker)',
  );
});
