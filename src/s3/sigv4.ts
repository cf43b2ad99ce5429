// AWS Signature Version 4 for S3: the canonical request, the string to sign, the signing key,
// and the parsing of both credential forms (the Authorization header and a presigned query).
//
// Invariants:
// - Pure functions of their arguments: no clock, no store. The caller supplies the time and the
//   secret; auth.ts checks the scope, the clock skew and the expiry.
// - Signatures are compared in constant time (`signatureMatches`: timingSafeEqual over the
//   hex texts, whose length is public), never with `===`.
// - The canonical URI is built from the raw path segment by segment (decoded once, encoded the
//   AWS way), so `%2F` inside a key stays `%2F` and a client that encodes more or fewer
//   characters than AWS's set still verifies (`canonicalUris` also offers the raw path).
//
// Persists: nothing. Signing keys (derived from the secret, valid for one day, region and
// service) are cached in memory per access key, at most SIGNING_KEYS_MAX.

import { createHash, createHmac, hash, timingSafeEqual } from 'node:crypto';
import { s3Error } from './errors.js';

export const ALGORITHM = 'AWS4-HMAC-SHA256';
export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
export const STREAMING_SIGNED = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
export const STREAMING_SIGNED_TRAILER = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER';
export const STREAMING_UNSIGNED_TRAILER = 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
export const EMPTY_SHA256 = createHash('sha256').digest('hex');
/** The longest a presigned URL may live (AWS's limit too). */
export const PRESIGN_SECONDS_MAX = 7 * 24 * 3600;
/** Signed headers a request may list at most (each one is canonicalised). */
const SIGNED_HEADERS_MAX = 64;

/** The credential scope of a signature: `date/region/service/aws4_request`. */
export interface CredentialScope {
  readonly accessKeyId: string;
  /** `YYYYMMDD` */
  readonly date: string;
  readonly region: string;
  readonly service: string;
}

/** What a signed request claims, from its Authorization header or its presigned query. */
export interface SignedClaim {
  readonly scope: CredentialScope;
  readonly signedHeaders: readonly string[];
  /** `signedHeaders` as the request listed them (`host;x-amz-date`), for the canonical request. */
  readonly signedHeadersText: string;
  readonly signature: string;
  /** The request time, `YYYYMMDDTHHMMSSZ`. */
  readonly amzDate: string;
  /** Presigned URLs: the lifetime in seconds from `amzDate`. */
  readonly expiresSeconds?: number;
  readonly presigned: boolean;
}

/** `Credential=AK/20130524/us-east-1/s3/aws4_request` → its parts; malformed refused. */
function parseCredential(text: string, error: 'header' | 'query'): CredentialScope {
  const parts = text.split('/');
  const [accessKeyId = '', date = '', region = '', service = '', terminator = ''] = parts;
  if (
    parts.length !== 5 ||
    accessKeyId === '' ||
    !/^\d{8}$/.test(date) ||
    region === '' ||
    service === '' ||
    terminator !== 'aws4_request'
  )
    throw malformed(error, 'the Credential must be AccessKeyId/YYYYMMDD/region/s3/aws4_request');
  return { accessKeyId, date, region, service };
}

function malformed(kind: 'header' | 'query', message: string): Error {
  return kind === 'header'
    ? s3Error('AuthorizationHeaderMalformed', message)
    : s3Error('AuthorizationQueryParametersError', message);
}

function parseSignedHeaders(text: string, kind: 'header' | 'query'): string[] {
  const names = text.split(';');
  if (
    names.length > SIGNED_HEADERS_MAX ||
    names.some((name) => !/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(name)) ||
    !names.includes('host')
  )
    throw malformed(kind, 'SignedHeaders must be lower-case header names and include host');
  return names;
}

/**
 * `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…` (the order of the three is
 * free, the separators may carry spaces).
 */
export function parseAuthorization(value: string, amzDate: string | undefined): SignedClaim {
  if (!value.startsWith(`${ALGORITHM} `))
    throw s3Error('AuthorizationHeaderMalformed', `the algorithm must be ${ALGORITHM}`);
  const fields = new Map<string, string>();
  for (const part of value.slice(ALGORITHM.length + 1).split(',')) {
    const equals = part.indexOf('=');
    if (equals < 0) continue;
    fields.set(part.slice(0, equals).trim(), part.slice(equals + 1).trim());
  }
  const credential = fields.get('Credential');
  const signedHeaders = fields.get('SignedHeaders');
  const signature = fields.get('Signature');
  if (credential === undefined || signedHeaders === undefined || signature === undefined)
    throw malformed('header', 'the header needs Credential, SignedHeaders and Signature');
  if (!/^[0-9a-f]{64}$/.test(signature)) throw malformed('header', 'the Signature is not hex');
  if (amzDate === undefined || !/^\d{8}T\d{6}Z$/.test(amzDate))
    throw s3Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
  return {
    scope: parseCredential(credential, 'header'),
    signedHeaders: parseSignedHeaders(signedHeaders, 'header'),
    signedHeadersText: signedHeaders,
    signature,
    amzDate,
    presigned: false,
  };
}

/** The `X-Amz-*` parameters of a presigned URL. */
export function parsePresigned(query: URLSearchParams): SignedClaim {
  const get = (name: string): string => {
    const values = query.getAll(name);
    if (values.length !== 1) throw malformed('query', `the query must carry ${name} exactly once`);
    return values[0] as string;
  };
  if (get('X-Amz-Algorithm') !== ALGORITHM)
    throw malformed('query', `X-Amz-Algorithm must be ${ALGORITHM}`);
  const amzDate = get('X-Amz-Date');
  if (!/^\d{8}T\d{6}Z$/.test(amzDate)) throw malformed('query', 'X-Amz-Date is not ISO 8601');
  const expires = get('X-Amz-Expires');
  if (!/^\d{1,7}$/.test(expires)) throw malformed('query', 'X-Amz-Expires must be seconds');
  const expiresSeconds = Number(expires);
  if (expiresSeconds > PRESIGN_SECONDS_MAX)
    throw malformed('query', 'X-Amz-Expires must be less than a week (604800 seconds)');
  const signature = get('X-Amz-Signature');
  if (!/^[0-9a-f]{64}$/.test(signature)) throw malformed('query', 'X-Amz-Signature is not hex');
  const signedHeadersText = get('X-Amz-SignedHeaders');
  return {
    scope: parseCredential(get('X-Amz-Credential'), 'query'),
    signedHeaders: parseSignedHeaders(signedHeadersText, 'query'),
    signedHeadersText,
    signature,
    amzDate,
    expiresSeconds,
    presigned: true,
  };
}

/** `YYYYMMDDTHHMMSSZ` → milliseconds since the epoch. */
export function amzDateMs(amzDate: string): number {
  const iso =
    `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T` +
    `${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`;
  return Date.parse(iso);
}

/** Texts AWS's URI encoding leaves as they are (the common case: checked once, not per byte). */
const UNRESERVED = /^[A-Za-z0-9\-_.~]*$/;
const UNRESERVED_OR_SLASH = /^[A-Za-z0-9\-_.~/]*$/;

/** AWS's URI encoding: everything but `A-Za-z0-9-_.~` as `%XX` of its UTF-8 bytes. */
export function awsEncode(text: string, keepSlash = false): string {
  if ((keepSlash ? UNRESERVED_OR_SLASH : UNRESERVED).test(text)) return text;
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const char = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-_.~]/.test(char) || (keepSlash && char === '/')) out += char;
    else out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function decodeLoose(text: string): string {
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The canonical URI of a raw path: each segment decoded once and encoded the AWS way. A path of
 * unreserved characters and slashes only (what SDKs send for ordinary keys) is its own canonical
 * form and is returned as it is, without splitting it.
 */
export function canonicalUri(rawPath: string): string {
  const path = rawPath === '' ? '/' : rawPath;
  if (UNRESERVED_OR_SLASH.test(path)) return path;
  let out = '';
  for (let start = 0; ;) {
    const slash = path.indexOf('/', start);
    out += awsEncode(decodeLoose(slash < 0 ? path.slice(start) : path.slice(start, slash)));
    if (slash < 0) return out;
    out += '/';
    start = slash + 1;
  }
}

/**
 * The canonical URIs to try, most likely first: the canonical URI (`canonicalUri`), then the
 * raw path as the client sent it (when it differs).
 */
export function canonicalUris(rawPath: string): string[] {
  const path = rawPath === '' ? '/' : rawPath;
  const canonical = canonicalUri(path);
  return canonical === path ? [canonical] : [canonical, path];
}

/**
 * The canonical query string: every parameter but `X-Amz-Signature`, names and values decoded
 * once and encoded the AWS way, sorted by name and then value; `?uploads` is `uploads=`.
 */
export function canonicalQuery(rawQuery: string): string {
  if (rawQuery === '') return '';
  // One parameter (an SDK's `x-id=PutObject`): nothing to sort.
  if (!rawQuery.includes('&')) {
    const pair = canonicalPair(rawQuery);
    return pair === undefined || pair[0] === 'X-Amz-Signature' ? '' : `${pair[0]}=${pair[1]}`;
  }
  const pairs: Array<[string, string]> = [];
  for (const part of rawQuery.split('&')) {
    const pair = canonicalPair(part);
    if (pair !== undefined && pair[0] !== 'X-Amz-Signature') pairs.push(pair);
  }
  pairs.sort((a, b) =>
    a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0,
  );
  return pairs.map(([name, value]) => `${name}=${value}`).join('&');
}

/** `name=value` (or `name`) decoded once and encoded the AWS way; undefined for ''. */
function canonicalPair(part: string): [string, string] | undefined {
  if (part === '') return undefined;
  const equals = part.indexOf('=');
  const name = awsEncode(decodeLoose(equals < 0 ? part : part.slice(0, equals)));
  const value = equals < 0 ? '' : awsEncode(decodeLoose(part.slice(equals + 1)));
  return [name, value];
}

/** A header value as SigV4 signs it: trimmed, inner runs of whitespace one space. */
export function canonicalHeaderValue(value: string): string {
  const trimmed = value.trim();
  return /\t| {2}/.test(trimmed) ? trimmed.replace(/[ \t]+/g, ' ') : trimmed;
}

export interface CanonicalInput {
  readonly method: string;
  readonly uri: string;
  readonly rawQuery: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly signedHeaders: readonly string[];
  /** `signedHeaders` joined with `;`, when the caller has it already. */
  readonly signedHeadersText?: string;
  readonly payloadHash: string;
}

/**
 * The canonical request of SigV4 (AWS's "Create a canonical request"), written in one string
 * as it goes: method, URI, query, one `name:value` line per signed header, a blank line, the
 * signed header names and the payload hash.
 */
export function canonicalRequest(input: CanonicalInput): string {
  let text = `${input.method}\n${input.uri}\n${canonicalQuery(input.rawQuery)}\n`;
  for (const name of input.signedHeaders) {
    const value = input.headers[name];
    if (value === undefined)
      throw s3Error('AccessDenied', `the signed header ${name} is not in the request`);
    text += `${name}:${canonicalHeaderValue(value)}\n`;
  }
  const signed = input.signedHeadersText ?? input.signedHeaders.join(';');
  return `${text}\n${signed}\n${input.payloadHash}`;
}

export function scopeText(scope: CredentialScope): string {
  return `${scope.date}/${scope.region}/${scope.service}/aws4_request`;
}

/** SHA-256 in hex, in one call (no Hash object: this runs once or more per request). */
export function sha256Hex(data: string | Uint8Array): string {
  return hash('sha256', data, 'hex');
}

export function stringToSign(amzDate: string, scope: CredentialScope, canonical: string): string {
  return `${ALGORITHM}\n${amzDate}\n${scopeText(scope)}\n${sha256Hex(canonical)}`;
}

const SIGNING_KEYS_MAX = 4096;
const signingKeys = new Map<string, { secret: Buffer; key: Buffer }>();

/**
 * kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request"),
 * cached per access key and scope (the cache entry remembers the secret it was made from, so a
 * key whose secret changed never signs with the old one).
 */
export function signingKey(secret: string, scope: CredentialScope): Buffer {
  const id = `${scope.accessKeyId}/${scopeText(scope)}`;
  const cached = signingKeys.get(id);
  const secretBytes = Buffer.from(secret, 'utf8');
  // Secrets are of one length (access-keys.ts); one of another length is simply derived anew.
  if (cached?.secret.length === secretBytes.length && timingSafeEqual(cached.secret, secretBytes))
    return cached.key;
  const hmac = (key: string | Buffer, data: string): Buffer =>
    createHmac('sha256', key).update(data).digest();
  const key = hmac(
    hmac(hmac(hmac(`AWS4${secret}`, scope.date), scope.region), scope.service),
    'aws4_request',
  );
  if (signingKeys.size >= SIGNING_KEYS_MAX) signingKeys.clear();
  signingKeys.set(id, { secret: secretBytes, key });
  return key;
}

export function hmacHex(key: Buffer, text: string): string {
  return createHmac('sha256', key).update(text).digest('hex');
}

/**
 * True when `given` is `expected`, compared in constant time. Both are hex digests, whose length
 * is public (the parsers refuse a signature that is not 64 hex digits), so their bytes are compared
 * directly, without hashing both first as `constantTimeEqual` does for secrets.
 */
export function signatureMatches(expected: string, given: string): boolean {
  // UTF-8, not latin-1: latin-1 would fold a character above U+00FF onto one byte of another.
  const expectedBytes = Buffer.from(expected, 'utf8');
  const givenBytes = Buffer.from(given, 'utf8');
  return expectedBytes.length === givenBytes.length && timingSafeEqual(expectedBytes, givenBytes);
}

/** The string a chunk of an aws-chunked body is signed with (its data's SHA-256 in hex). */
export function chunkStringToSign(options: {
  readonly amzDate: string;
  readonly scope: CredentialScope;
  readonly previous: string;
  readonly dataHash: string;
}): string {
  return (
    `${ALGORITHM}-PAYLOAD\n${options.amzDate}\n${scopeText(options.scope)}\n` +
    `${options.previous}\n${EMPTY_SHA256}\n${options.dataHash}`
  );
}

/** The string the trailer of an aws-chunked body is signed with. */
export function trailerStringToSign(options: {
  readonly amzDate: string;
  readonly scope: CredentialScope;
  readonly previous: string;
  /** The trailer lines as `name:value\n` each. */
  readonly trailer: string;
}): string {
  return (
    `${ALGORITHM}-TRAILER\n${options.amzDate}\n${scopeText(options.scope)}\n` +
    `${options.previous}\n${sha256Hex(options.trailer)}`
  );
}
