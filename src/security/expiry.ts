// Expiry times supplied by people: `expiresAt` on access keys (admin-api.md §2: RFC 3339 or
// `YYYY-MM-DD`) and `--expires` of `lightwell admin-token create` (DECISIONS.md: `30d` or
// RFC 3339); and the other timestamps of request bodies, which are RFC 3339 date-times only
// (`parseDateTime`: retention's `retainUntil`, a copy's `ifModifiedSince`).
//
// Invariants:
// - Every result is a time in milliseconds since the epoch that lies strictly after `nowMs`;
//   anything else is `bad_request` with a message naming the accepted forms.
// - RFC 3339 is parsed by its grammar (§5.6) and its ranges checked here, never by
//   `Date.parse`, which accepts many other forms and differs between engines. Fractions of a
//   second beyond milliseconds are truncated. A leap second (:60) is read as the next second.
// - A bare date `YYYY-MM-DD` means the END of that day in UTC, 23:59:59.999Z: an operator
//   who writes "expires 2025-06-30" expects the key to work throughout 30 June, and an expiry at
//   00:00Z would cut it off a day early (or, for today's date, make it already expired).
//
// Persists: nothing.

import assert from 'node:assert/strict';
import { BadRequest, isLightwellError } from '../util/errors.js';
import { parseDuration } from '../util/config.js';

/** Longer inputs are refused before any parsing. */
export const EXPIRY_TEXT_CHARS_MAX = 64;
/** The latest time a JavaScript Date can hold (ECMA-262 §21.4.1.1). */
export const EXPIRY_MS_MAX = 8.64e15;

const rfc3339Pattern = new RegExp(
  '^(\\d{4})-(\\d{2})-(\\d{2})[Tt](\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d+))?' +
    '(?:([Zz])|([+-])(\\d{2}):(\\d{2}))$',
);
const datePattern = /^(\d{4})-(\d{2})-(\d{2})$/;
const dateTimeForm = 'an RFC 3339 timestamp (2025-06-30T12:00:00Z)';
const formsAccepted = `${dateTimeForm} or a date (2025-06-30)`;

interface DateParts {
  readonly year: number;
  readonly month: number;
  readonly day: number;
}

function daysInMonth(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
}

function validDate(parts: DateParts): boolean {
  const { year, month, day } = parts;
  return month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year, month);
}

/** Date.UTC maps years 0–99 to 1900–1999; setUTCFullYear does not. */
function utcMs(parts: DateParts, hour: number, minute: number, second: number, ms: number): number {
  const date = new Date(0);
  date.setUTCFullYear(parts.year, parts.month - 1, parts.day);
  date.setUTCHours(hour, minute, second, ms);
  return date.getTime();
}

function invalid(what: string, text: string, forms = formsAccepted): never {
  const shown = text.length <= EXPIRY_TEXT_CHARS_MAX ? JSON.stringify(text) : 'the value';
  throw BadRequest(`${what}: ${shown} is not ${forms}`);
}

/**
 * An RFC 3339 date-time in a request body, to ms since the epoch, without judging past or
 * future: `2027-02-30T00:00:00Z`, a time without its offset, `Jan 1 2027` and every other form
 * that `Date.parse` would take are bad_request.
 */
export function parseDateTime(text: unknown, what: string): number {
  if (typeof text !== 'string') throw BadRequest(`${what} must be ${dateTimeForm}`);
  if (datePattern.test(text)) invalid(what, text, dateTimeForm);
  return parseTimestamp(text, what, dateTimeForm);
}

/** Parses an RFC 3339 timestamp or YYYY-MM-DD to ms, without judging past or future. */
function parseTimestamp(text: string, what: string, forms = formsAccepted): number {
  if (text.length > EXPIRY_TEXT_CHARS_MAX) invalid(what, text, forms);
  const dateOnly = datePattern.exec(text);
  if (dateOnly !== null) {
    const [, y, mo, d] = dateOnly;
    const parts = { year: Number(y), month: Number(mo), day: Number(d) };
    if (!validDate(parts)) invalid(what, text);
    return utcMs(parts, 23, 59, 59, 999);
  }
  const match = rfc3339Pattern.exec(text);
  if (match === null) return invalid(what, text, forms);
  const [, y, mo, d, h, mi, s, fraction = '', zulu, sign, oh, om] = match;
  const parts = { year: Number(y), month: Number(mo), day: Number(d) };
  const [hour, minute, second] = [Number(h), Number(mi), Number(s)];
  const [offsetHours, offsetMinutes] = [Number(oh ?? 0), Number(om ?? 0)];
  const timeValid = hour <= 23 && minute <= 59 && second <= 60;
  const offsetValid = offsetHours <= 23 && offsetMinutes <= 59;
  if (!validDate(parts) || !timeValid || !offsetValid) invalid(what, text, forms);
  const ms = Number(fraction.slice(0, 3).padEnd(3, '0'));
  const offsetMs = zulu === undefined ? (offsetHours * 60 + offsetMinutes) * 60_000 : 0;
  const local = utcMs(parts, hour, minute, second, ms);
  return sign === '-' ? local + offsetMs : local - offsetMs;
}

function requireFuture(ms: number, nowMs: number, what: string): number {
  // A NaN clock would make the past check below false, that is, accept any time.
  assert.ok(Number.isFinite(nowMs), 'nowMs must be a finite time');
  if (!Number.isFinite(ms) || ms > EXPIRY_MS_MAX) throw BadRequest(`${what} is out of range`);
  if (ms <= nowMs) throw BadRequest(`${what} is in the past`);
  return ms;
}

/**
 * `expiresAt` of an access key: an RFC 3339 timestamp, or `YYYY-MM-DD` meaning 23:59:59.999Z
 * of that day. Returns ms since the epoch; invalid or not after `nowMs` → bad_request.
 */
export function parseExpiresAt(text: unknown, nowMs: number): number {
  if (typeof text !== 'string') throw BadRequest('expiresAt must be a string');
  return requireFuture(parseTimestamp(text, 'expiresAt'), nowMs, 'expiresAt');
}

/**
 * `--expires` of `admin-token create`: a duration from now (`30d`, `12h`, `1h30m`; see
 * parseDuration) or an absolute time as parseExpiresAt takes it. Returns ms since the epoch.
 */
export function parseAdminExpires(text: unknown, nowMs: number): number {
  if (typeof text !== 'string') throw BadRequest('--expires must be a string');
  if (text.length > EXPIRY_TEXT_CHARS_MAX) invalid('--expires', text);
  if (/^\d{4}-/.test(text)) {
    return requireFuture(parseTimestamp(text, '--expires'), nowMs, '--expires');
  }
  let durationMs: number;
  try {
    durationMs = parseDuration(text, '--expires');
  } catch (error) {
    // A duration past the longest (about 292 years) is one: its own message says so.
    if (isLightwellError(error) && error.details['longest'] !== undefined) throw error;
    throw BadRequest(
      `--expires: ${JSON.stringify(text)} is neither a duration such as 30d or 12h nor ` +
        formsAccepted,
    );
  }
  if (durationMs <= 0) throw BadRequest('--expires must be a duration longer than zero');
  return requireFuture(nowMs + durationMs, nowMs, '--expires');
}
