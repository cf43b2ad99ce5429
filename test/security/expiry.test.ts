// Goal: expiry inputs accept exactly RFC 3339 timestamps, YYYY-MM-DD (end of that day UTC)
// and, for --expires, durations; they refuse malformed, impossible and past times with
// bad_request. The other timestamps of request bodies (parseDateTime) take RFC 3339
// date-times only, in the past or the future.
// Method: tables of inputs with their expected milliseconds or error message, against a fixed
// clock.
import t from 'tap';
import {
  EXPIRY_MS_MAX,
  parseAdminExpires,
  parseDateTime,
  parseExpiresAt,
} from '../../src/security/expiry.js';

const nowMs = Date.UTC(2025, 0, 15, 12, 0, 0);
const dayMs = 86_400_000;
const badRequest = (message: RegExp) => ({ code: 'bad_request', status: 400, message });

t.test('RFC 3339 timestamps', async (t) => {
  const cases: [string, number][] = [
    ['2025-06-30T12:00:00Z', Date.UTC(2025, 5, 30, 12)],
    ['2025-06-30t12:00:00z', Date.UTC(2025, 5, 30, 12)],
    ['2025-06-30T12:00:00.5Z', Date.UTC(2025, 5, 30, 12, 0, 0, 500)],
    ['2025-06-30T12:00:00.123456789Z', Date.UTC(2025, 5, 30, 12, 0, 0, 123)],
    ['2025-06-30T12:00:00+02:00', Date.UTC(2025, 5, 30, 10)],
    ['2025-06-30T12:00:00-05:30', Date.UTC(2025, 5, 30, 17, 30)],
    ['2025-06-30T12:00:00+00:00', Date.UTC(2025, 5, 30, 12)],
    ['2028-02-29T00:00:00Z', Date.UTC(2028, 1, 29)],
    ['2025-12-31T23:59:60Z', Date.UTC(2026, 0, 1)],
    ['9999-12-31T23:59:59Z', Date.UTC(9999, 11, 31, 23, 59, 59)],
  ];
  for (const [text, expected] of cases) t.equal(parseExpiresAt(text, nowMs), expected, text);
});

t.test('a bare date means 23:59:59.999Z of that day', async (t) => {
  t.equal(parseExpiresAt('2025-06-30', nowMs), Date.UTC(2025, 5, 30, 23, 59, 59, 999));
  t.equal(parseExpiresAt('2025-01-15', nowMs), Date.UTC(2025, 0, 15, 23, 59, 59, 999), 'today');
  const leapDay = Date.UTC(2024, 1, 29, 23, 59, 59, 999);
  t.equal(parseExpiresAt('2024-02-29', Date.UTC(2024, 0, 1)), leapDay);
});

t.test('malformed and impossible times are refused', async (t) => {
  const malformed = [
    '',
    'tomorrow',
    '30d',
    '2025-06-30T12:00:00',
    '2025-06-30 12:00:00Z',
    '2025-06-30T12:00Z',
    '2025-6-30',
    '25-06-30',
    '2025-06-30T12:00:00.Z',
    '2025-06-30T12:00:00+0200',
    '2025-06-30T12:00:00+02',
    ' 2025-06-30',
    '2025-06-30\n',
    '+002025-06-30',
    '2025-02-29',
    '2025-02-30T00:00:00Z',
    '2025-04-31',
    '2025-13-01',
    '2025-00-10',
    '2025-06-00',
    '2025-06-30T24:00:00Z',
    '2025-06-30T12:60:00Z',
    '2025-06-30T12:00:61Z',
    '2025-06-30T12:00:00+24:00',
    '2025-06-30T12:00:00+02:60',
    '2100-02-29',
    '１２３４-06-30',
  ];
  for (const text of malformed) {
    const message = /expiresAt: .* is not an RFC 3339 timestamp/;
    t.throws(() => parseExpiresAt(text, nowMs), badRequest(message), text);
  }
  const long = `2025-06-30T12:00:00.${'1'.repeat(100)}Z`;
  t.throws(() => parseExpiresAt(long, nowMs), badRequest(/the value is not/), 'too long');
  t.throws(() => parseExpiresAt(1735689600000, nowMs), badRequest(/expiresAt must be a string/));
});

t.test('times not after now are refused', async (t) => {
  t.throws(() => parseExpiresAt('2025-01-14', nowMs), badRequest(/expiresAt is in the past/));
  const exactlyNow = '2025-01-15T12:00:00Z';
  t.throws(() => parseExpiresAt(exactlyNow, nowMs), badRequest(/in the past/), 'exactly now');
  t.ok(parseExpiresAt('2025-01-15T12:00:00.001Z', nowMs), '1 ms later');
  t.throws(() => parseExpiresAt('0000-01-01T00:00:00Z', nowMs), badRequest(/in the past/));
  const year99 = '0099-12-31';
  t.throws(() => parseExpiresAt(year99, nowMs), badRequest(/in the past/), 'not read as 1999');
  t.throws(() => parseExpiresAt('2025-06-30', Number.NaN), { code: 'ERR_ASSERTION' });
});

t.test('--expires: durations from now or absolute times', async (t) => {
  t.equal(parseAdminExpires('30d', nowMs), nowMs + 30 * dayMs);
  t.equal(parseAdminExpires('12h', nowMs), nowMs + 12 * 3_600_000);
  t.equal(parseAdminExpires('1h30m', nowMs), nowMs + 5_400_000);
  t.equal(parseAdminExpires('2w', nowMs), nowMs + 14 * dayMs);
  t.equal(parseAdminExpires('2025-06-30T12:00:00Z', nowMs), Date.UTC(2025, 5, 30, 12));
  t.equal(parseAdminExpires('2025-06-30', nowMs), Date.UTC(2025, 5, 30, 23, 59, 59, 999));
});

t.test('--expires: refusals', async (t) => {
  const cases: [unknown, RegExp][] = [
    [undefined, /--expires must be a string/],
    ['', /neither a duration such as 30d or 12h nor an RFC 3339 timestamp/],
    ['30 days', /neither a duration/],
    ['-30d', /neither a duration/],
    ['forever', /neither a duration/],
    ['0d', /longer than zero/],
    ['0s', /longer than zero/],
    ['2025-01-01', /--expires is in the past/],
    ['2025-02-30', /--expires: "2025-02-30" is not an RFC 3339 timestamp/],
    ['999999999999999d', /"999999999999999d" is longer than the longest duration/],
    ['9'.repeat(65), /the value is not/],
  ];
  for (const [text, message] of cases) {
    t.throws(() => parseAdminExpires(text, nowMs), badRequest(message), String(text));
  }
  t.equal(EXPIRY_MS_MAX, 8.64e15);
});

t.test('request-body date-times are RFC 3339 date-times only', async (t) => {
  t.equal(parseDateTime('2025-06-30T12:00:00+02:00', 'x'), Date.UTC(2025, 5, 30, 10));
  t.equal(parseDateTime('1999-01-01T00:00:00Z', 'x'), Date.UTC(1999, 0, 1), 'the past too');
  for (const text of [
    '2027-02-30T00:00:00Z',
    '2027-01-01T24:00:00Z',
    '2027-01-01T00:00:00',
    '2027-01-01',
    'Jan 1 2027',
    '2027',
    'Sun, 22 Nov 2026 23:00:00 GMT',
    '+275760-09-13T00:00:00Z',
  ]) {
    t.throws(() => parseDateTime(text, 'retainUntil'), badRequest(/^retainUntil: /), text);
  }
  t.throws(() => parseDateTime(42, 'retainUntil'), badRequest(/retainUntil must be an RFC 3339/));
});
