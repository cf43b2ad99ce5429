// Validators for every name a client or operator chooses: bucket names, object keys, tenant
// and account ids, user metadata, and free text that people read (no control characters).
//
// Invariants:
// - Each validator accepts `unknown` and either returns or throws `bad_request` with a message
//   that says which rule failed. No other exception escapes, whatever the input.
// - Messages quote at most `QUOTED_CHARS_MAX` characters of the input, so a huge or hostile
//   value is never echoed back whole.
// - Object keys are opaque byte strings, not paths: '.', '..' and '/' have no meaning here and
//   a key must never be joined into a filesystem path.
//
// Persists: nothing.

import { BadRequest } from '../util/errors.js';

export const BUCKET_NAME_CHARS_MIN = 3;
export const BUCKET_NAME_CHARS_MAX = 63;
export const OBJECT_KEY_BYTES_MAX = 1024;
export const TENANT_ID_CHARS_MIN = 3;
export const TENANT_ID_CHARS_MAX = 63;
/** S3's limit: the UTF-8 bytes of all user metadata names and values together. */
export const USER_METADATA_BYTES_MAX = 2048;
export const QUOTED_CHARS_MAX = 64;
/** An object's Content-Type: stored with it and sent back as a response header. */
export const CONTENT_TYPE_CHARS_MAX = 256;

// Reserved by S3 for its own features; refused so every Lightwell bucket name is valid on S3.
const bucketPrefixesReserved = ['xn--', 'sthree-', 'amzn-s3-demo-'];
/**
 * Names whose path-style S3 address is another API's namespace on the public port: `/api/v1/…`
 * is the native API, so a bucket `api` could not be reached for keys under `v1/`.
 */
const bucketNamesReserved = ['api'];
const bucketSuffixesReserved = ['-s3alias', '--ol-s3', '.mrap', '--x-s3', '--table-s3'];

const loneSurrogatePattern =
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const idPattern = /^[a-z0-9-]+$/;
/**
 * Service-account ids: DECISIONS.md rules only tenant ids, so accounts take the usual id
 * characters of identity systems (letters of either case, digits, `.`, `_`, `@`, `-`), 1–64.
 */
export const ACCOUNT_ID_CHARS_MAX = 64;
const accountIdPattern = /^[A-Za-z0-9._@-]+$/;
const metadataNamePattern = /^[a-z0-9_-]+$/;
// Visible ASCII (RFC 9110's VCHAR), with space or tab between: a value travels as a header, and
// HTTP's obs-text (0x80–0xFF) does not arrive intact (uWebSockets.js strips it from both ends of
// a value), as leading and trailing whitespace would not. Other characters go percent-encoded,
// as S3 asks of its user metadata too.
const metadataValuePattern = /^(?:[\x21-\x7E](?:[\x20\x09\x21-\x7E]*[\x21-\x7E])?)?$/;

/**
 * A Content-Type to store with an object: 1 to CONTENT_TYPE_CHARS_MAX visible ASCII characters
 * (spaces inside), since it goes back out as a response header; a CR or LF would let the client
 * write headers and a body of its own into every read of the object.
 */
export function validateContentType(value: unknown, what = 'contentType'): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > CONTENT_TYPE_CHARS_MAX ||
    !/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(value)
  )
    throw BadRequest(`${what} must be 1 to ${CONTENT_TYPE_CHARS_MAX} visible ASCII characters`);
  return value;
}

/** The rule of `refuseControlChars` as a JSON Schema pattern, for the published documents. */
export const NO_CONTROL_CHARS_PATTERN = '^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$';

/**
 * Text that people read back (names, reasons, external references, tags): 400 naming `field`
 * for a control character (C0, U+0000 to U+001F; DEL and C1, U+007F to U+009F) or a Unicode
 * line or paragraph separator (U+2028, U+2029). CR, LF, NEL (U+0085) and the separators would
 * forge lines in logs, audit exports and the viewers that break lines at them, NUL cuts C
 * strings short; none has a use in a name.
 */
export function refuseControlChars(value: string, field: string): void {
  for (let index = 0; index < value.length; index += 1) {
    const unit = value.charCodeAt(index);
    if (unit >= 0x20 && (unit < 0x7f || unit > 0x9f) && unit !== 0x2028 && unit !== 0x2029)
      continue;
    const found = `U+${unit.toString(16).toUpperCase().padStart(4, '0')}`;
    throw BadRequest(
      `${field} must not contain control characters or line separators ` +
        `(U+0000 to U+001F, U+007F to U+009F, U+2028, U+2029); found ${found}`,
    );
  }
}

/** JSON-quotes at most QUOTED_CHARS_MAX characters of `text`, for error messages. */
export function quoteForMessage(text: string): string {
  if (text.length <= QUOTED_CHARS_MAX) return JSON.stringify(text);
  return `${JSON.stringify(text.slice(0, QUOTED_CHARS_MAX))}…`;
}

/**
 * The answer to a JSON field nobody declared: 400 naming it (its first QUOTED_CHARS_MAX
 * characters), and `where` it is inside a larger body (`rules[2]`), if anywhere.
 */
export function unknownField(name: string, where?: string): Error {
  const field = `unknown field ${JSON.stringify(name.slice(0, QUOTED_CHARS_MAX))}`;
  return BadRequest(where === undefined || where === '' ? field : `${where}: ${field}`);
}

/**
 * Refuses the first field of a JSON object that `known` does not hold, so that a misspelt field
 * is never ignored; `where` names the object inside a larger body (`rules[2]`).
 */
export function refuseUnknownFields(
  fields: object,
  known: ReadonlySet<string>,
  where?: string,
): void {
  for (const name of Object.keys(fields)) if (!known.has(name)) throw unknownField(name, where);
}

/** S3 bucket-name rules. */
export function validateBucketName(name: unknown): asserts name is string {
  if (typeof name !== 'string') throw BadRequest('bucket name must be a string');
  const quoted = quoteForMessage(name);
  if (name.length < BUCKET_NAME_CHARS_MIN || name.length > BUCKET_NAME_CHARS_MAX) {
    throw BadRequest(`bucket name ${quoted} must be 3 to 63 characters long`);
  }
  if (!/^[a-z0-9.-]+$/.test(name)) {
    throw BadRequest(
      `bucket name ${quoted} may contain only lowercase letters, digits, dots and hyphens`,
    );
  }
  if (!/^[a-z0-9]/.test(name) || !/[a-z0-9]$/.test(name)) {
    throw BadRequest(`bucket name ${quoted} must begin and end with a letter or digit`);
  }
  if (name.includes('..')) {
    throw BadRequest(`bucket name ${quoted} must not contain two adjacent dots`);
  }
  // Each dot-separated label is a DNS label: it begins and ends with a letter or digit.
  if (name.includes('.-') || name.includes('-.')) {
    throw BadRequest(`bucket name ${quoted} must not have a hyphen beside a dot`);
  }
  if (/^\d+\.\d+\.\d+\.\d+$/.test(name)) {
    throw BadRequest(`bucket name ${quoted} must not be formatted as an IP address`);
  }
  if (bucketNamesReserved.includes(name)) {
    throw BadRequest(`bucket name ${quoted} is reserved: its path is another API's on this port`);
  }
  const prefix = bucketPrefixesReserved.find((reserved) => name.startsWith(reserved));
  if (prefix !== undefined) {
    throw BadRequest(`bucket name ${quoted} must not begin with the reserved prefix ${prefix}`);
  }
  const suffix = bucketSuffixesReserved.find((reserved) => name.endsWith(reserved));
  if (suffix !== undefined) {
    throw BadRequest(`bucket name ${quoted} must not end with the reserved suffix ${suffix}`);
  }
}

/**
 * Checks an object key (or, with `allowEmpty`, a key prefix): well-formed UTF-16, no U+0000,
 * at most 1024 UTF-8 bytes. Returns the UTF-8 byte length.
 */
export function validateObjectKey(
  key: unknown,
  options: { allowEmpty?: boolean; what?: string } = {},
): number {
  const what = options.what ?? (options.allowEmpty === true ? 'key prefix' : 'object key');
  if (typeof key !== 'string') throw BadRequest(`${what} must be a string`);
  if (key.length === 0 && options.allowEmpty !== true) {
    throw BadRequest('object key must not be empty');
  }
  // Checked before measuring: a lone surrogate would be counted as U+FFFD's three bytes.
  if (loneSurrogatePattern.test(key)) {
    throw BadRequest(`${what} must be valid Unicode (it contains a lone surrogate)`);
  }
  if (key.includes('\u0000')) throw BadRequest(`${what} must not contain U+0000`);
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > OBJECT_KEY_BYTES_MAX) {
    throw BadRequest(`${what} is ${bytes} bytes of UTF-8; the limit is ${OBJECT_KEY_BYTES_MAX}`);
  }
  return bytes;
}

function validateId(id: unknown, what: string): asserts id is string {
  if (typeof id !== 'string') throw BadRequest(`${what} must be a string`);
  if (id.length < TENANT_ID_CHARS_MIN || id.length > TENANT_ID_CHARS_MAX) {
    throw BadRequest(`${what} ${quoteForMessage(id)} must be 3 to 63 characters long`);
  }
  if (!idPattern.test(id)) {
    throw BadRequest(
      `${what} ${quoteForMessage(id)} may contain only lowercase letters, digits and hyphens`,
    );
  }
}

/** Whether `id` is a tenant id (validateTenantId's rule, without the message). */
export function isTenantId(id: unknown): id is string {
  return (
    typeof id === 'string' &&
    id.length >= TENANT_ID_CHARS_MIN &&
    id.length <= TENANT_ID_CHARS_MAX &&
    idPattern.test(id)
  );
}

/** Tenant ids: 3–63 of a-z, 0-9 and '-' (DECISIONS.md). */
export function validateTenantId(id: unknown): asserts id is string {
  validateId(id, 'tenant id');
}

/** Service-account ids: 1–64 of letters, digits, '.', '_', '@' and '-' (see ACCOUNT_ID_CHARS_MAX). */
export function validateAccountId(id: unknown): asserts id is string {
  if (typeof id !== 'string') throw BadRequest('account id must be a string');
  if (id.length === 0 || id.length > ACCOUNT_ID_CHARS_MAX) {
    throw BadRequest(
      `account id ${quoteForMessage(id)} must be 1 to ${ACCOUNT_ID_CHARS_MAX} characters long`,
    );
  }
  if (!accountIdPattern.test(id)) {
    throw BadRequest(
      `account id ${quoteForMessage(id)} may contain only letters, digits, '.', '_', '@' and '-'`,
    );
  }
}

/**
 * User metadata (`X-Service-Meta-<name>`): names are non-empty lowercase tokens of a-z, 0-9,
 * '-' and '_' (header names are case-insensitive, so callers lower-case them first); values
 * are printable ASCII with inner spaces and tabs (see metadataValuePattern); names and
 * values together are at most 2 KiB of UTF-8, as in S3. Returns that total. Takes a plain
 * object or a Map.
 */
export function validateUserMetadata(map: unknown): number {
  if (typeof map !== 'object' || map === null || Array.isArray(map)) {
    throw BadRequest('metadata must be an object of names to string values');
  }
  const entries: [unknown, unknown][] =
    map instanceof Map ? [...(map as Map<unknown, unknown>)] : Object.entries(map);
  let bytes = 0;
  for (const [name, value] of entries) {
    if (typeof name !== 'string') throw BadRequest('metadata names must be strings');
    if (name.length === 0) throw BadRequest('metadata names must not be empty');
    bytes += Buffer.byteLength(name, 'utf8');
    if (bytes > USER_METADATA_BYTES_MAX) break;
    if (!metadataNamePattern.test(name)) {
      throw BadRequest(
        `metadata name ${quoteForMessage(name)} may contain only lowercase letters, digits, ` +
          `'-' and '_'`,
      );
    }
    if (typeof value !== 'string') {
      throw BadRequest(`metadata value of ${quoteForMessage(name)} must be a string`);
    }
    bytes += Buffer.byteLength(value, 'utf8');
    if (bytes > USER_METADATA_BYTES_MAX) break;
    if (!metadataValuePattern.test(value)) {
      throw BadRequest(
        `metadata value of ${quoteForMessage(name)} must be printable ASCII, with spaces or ` +
          'tabs only inside it (percent-encode other characters)',
      );
    }
  }
  if (bytes > USER_METADATA_BYTES_MAX) {
    throw BadRequest(`metadata is over ${USER_METADATA_BYTES_MAX} bytes (names and values)`);
  }
  return bytes;
}
