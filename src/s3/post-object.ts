// S3's POST object (browser form uploads): a multipart/form-data body parsed by busboy, whose
// fields come first (key, policy, signature, Content-Type, x-amz-meta-*, acl, ...) and whose
// `file` part is streamed into the same upload pipeline as a PUT, never held whole.
//
// - Authentication is the form's: a SigV4 POST policy (`x-amz-algorithm` AWS4-HMAC-SHA256,
//   `x-amz-credential`, `x-amz-date`, `x-amz-signature` = HMAC-SHA256 of the base64 policy under
//   the scope's signing key) or the older form (`AWSAccessKeyId`, `signature` = base64
//   HMAC-SHA1 of the base64 policy under the secret). Both sign only the policy document, which
//   is the whole of what the server enforces, so the older MAC weakens nothing the newer adds
//   (docs/s3.md). A form without a policy is anonymous, allowed only where the bucket grants
//   public writes.
// - The policy: `expiration` (ISO 8601, required) and `conditions` (required, non-empty):
//   `{field: value}` and `["eq", "$field", value]` (exact), `["starts-with", "$field", prefix]`
//   and `["content-length-range", min, max]`. Every form field but the file, the policy, the
//   signature fields and `x-ignore-*` must be covered by a condition; `${filename}` in the key is
//   the file's name.
// - The file's length is the request's Content-Length less the bytes before the file's data and
//   the closing boundary (`\r\n--boundary--\r\n`): the pipeline needs it before the first byte.
//   A file that is not the last part, or a body of another length, fails before the commit.
// - Answers: `success_action_redirect` (303 to it with bucket, key and etag), else
//   `success_action_status` 200, 201 (a PostResponse document) or 204 (the default).
//
// Limits: fields before the file at most PRE_FILE_BYTES_MAX bytes in all
// (`MaxPostPreDataLengthExceededError`), each field at most FIELD_BYTES_MAX, FIELDS_MAX fields.
//
// Persists: nothing itself; the object through the service's write path.

import { createHmac } from 'node:crypto';
import busboy from 'busboy';
import type { S3Api, S3Principal, S3Request } from './api.js';
import { actingPrincipal } from './access.js';
import { withRequestedAcl } from './access-ops.js';
import { liveCredential } from './auth.js';
import { bucketFor } from './buckets.js';
import { formEncryptionOf } from './encryption.js';
import { s3Error } from './errors.js';
import { representationOf } from './object-headers.js';
import { hmacHex, signatureMatches, signingKey } from './sigv4.js';
import { XmlWriter } from './xml.js';
import type { BodySource } from '../service/body.js';
import { contextOf } from '../service/context.js';
import { ObjectService } from '../service/objects.js';
import { validateObjectKey } from '../security/names.js';
import { isLightwellError } from '../util/errors.js';

export const PRE_FILE_BYTES_MAX = 64 * 1024;
export const FIELD_BYTES_MAX = 20 * 1024;
export const FIELDS_MAX = 64;

export function registerPostObject(api: S3Api): void {
  api.register('PostObject', postObject);
}

/** The form's fields (names lower-cased) and the file's name, once the file part begins. */
interface Form {
  readonly fields: ReadonlyMap<string, string>;
  readonly filename: string;
}

/** A BodySource over the file part's stream, paced by the request's own flow control. */
class FileSource implements BodySource {
  aborted = false;
  private handler: ((chunk: ArrayBuffer, isLast: boolean) => void) | undefined;
  private readonly pending: Array<[ArrayBuffer, boolean]> = [];
  private readonly abortHandlers: Array<() => void> = [];

  constructor(private readonly request: S3Request) {}

  push(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.aborted) return;
    if (this.handler) {
      this.handler(chunk, isLast);
      return;
    }
    // Until the pipeline attaches, what arrives waits here and the client is paused.
    this.pending.push([chunk.slice(0), isLast]);
    this.request.exchange.pauseReading();
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.pending.length = 0;
    for (const run of this.abortHandlers.splice(0)) run();
  }

  onBody(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    this.handler = handler;
    const waiting = this.pending.splice(0);
    for (const [chunk, isLast] of waiting) handler(chunk, isLast);
    if (waiting.length > 0) this.request.exchange.resumeReading();
  }

  onAbort(handler: () => void): void {
    if (this.aborted) handler();
    else this.abortHandlers.push(handler);
  }

  pauseReading(): void {
    this.request.exchange.pauseReading();
  }

  resumeReading(): void {
    this.request.exchange.resumeReading();
  }
}

async function postObject(request: S3Request): Promise<void> {
  const { exchange } = request;
  const type = exchange.header('content-type') ?? '';
  const boundary = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(type);
  if (!/^multipart\/form-data/i.test(type) || !boundary)
    throw s3Error('MalformedPOSTRequest', 'the body must be multipart/form-data with a boundary');
  const total = Number(exchange.header('content-length') ?? 'NaN');
  if (!Number.isSafeInteger(total))
    throw s3Error('MissingContentLength', 'a POST upload needs Content-Length');
  const marker = boundary[1] ?? boundary[2] ?? '';
  const source = new FileSource(request);
  const parsed = parseForm(request, type, marker, total, source);
  try {
    const { form, fileLength } = await parsed.form;
    const outcome = await store(request, form, fileLength, source);
    await parsed.done;
    answer(request, form, outcome);
  } catch (error) {
    // The rest of the body is read and dropped, so that the refusal reaches the client.
    parsed.discard();
    throw error;
  }
}

/**
 * Feeds the body to busboy; resolves with the fields once the file part begins (and the file's
 * length), then pushes the file's bytes into `source`.
 */
function parseForm(
  request: S3Request,
  type: string,
  marker: string,
  total: number,
  source: FileSource,
): {
  form: Promise<{ form: Form; fileLength: number }>;
  done: Promise<void>;
  discard(): void;
} {
  const { exchange } = request;
  const parser = busboy({
    headers: { 'content-type': type },
    limits: {
      fieldSize: FIELD_BYTES_MAX,
      fields: FIELDS_MAX,
      files: FIELDS_MAX + 1,
      parts: FIELDS_MAX + 1,
    },
  });
  const fields = new Map<string, string>();
  let raw: Buffer[] = [];
  let rawBytes = 0;
  let fileSeen = false;
  let settleForm!: (value: { form: Form; fileLength: number }) => void;
  let failForm!: (error: unknown) => void;
  const form = new Promise<{ form: Form; fileLength: number }>((resolve, reject) => {
    settleForm = resolve;
    failForm = reject;
  });
  let settleDone!: () => void;
  let failDone!: (error: unknown) => void;
  const done = new Promise<void>((resolve, reject) => {
    settleDone = resolve;
    failDone = reject;
  });
  // Whoever is waiting hears of a failure; the other promise must not reject unheard.
  done.catch(() => undefined);
  const fail = (error: unknown): void => {
    failForm(error);
    failDone(error);
    source.abort();
  };
  parser.on('field', (name, value, info) => {
    if (fileSeen) return;
    if (info.valueTruncated)
      return fail(
        s3Error('MaxPostPreDataLengthExceededError', `field ${name.slice(0, 64)} too long`),
      );
    fields.set(name.toLowerCase(), value);
  });
  parser.on('fieldsLimit', () => fail(s3Error('MalformedPOSTRequest', 'too many form fields')));
  // Clients may send any field as a part with a filename (Python's requests does): such a part
  // before the file is a field, read whole within the field limit.
  let fieldParts = 0;
  let settle: (() => void) | undefined;
  parser.on('file', (name, stream, info) => {
    stream.on('error', (error: unknown) =>
      fail(s3Error('MalformedPOSTRequest', error instanceof Error ? error.message : undefined)),
    );
    if (fileSeen) {
      stream.resume();
      return;
    }
    if (name.toLowerCase() !== 'file') {
      fieldParts += 1;
      const parts: Buffer[] = [];
      let length = 0;
      stream.on('data', (chunk: Buffer) => {
        length += chunk.byteLength;
        if (length <= FIELD_BYTES_MAX) parts.push(chunk);
      });
      stream.on('end', () => {
        if (length > FIELD_BYTES_MAX)
          fail(s3Error('MaxPostPreDataLengthExceededError', `field ${name.slice(0, 64)} too long`));
        else fields.set(name.toLowerCase(), Buffer.concat(parts).toString('utf8'));
        fieldParts -= 1;
        if (fieldParts === 0) settle?.();
      });
      return;
    }
    fileSeen = true;
    const head = Buffer.concat(raw);
    raw = [];
    const start = fileDataStart(head, marker);
    const closing = Buffer.byteLength(`\r\n--${marker}--\r\n`);
    if (start < 0) return fail(s3Error('MalformedPOSTRequest', 'the file part is malformed'));
    settle = () =>
      settleForm({
        form: { fields, filename: info.filename ?? '' },
        fileLength: total - start - closing,
      });
    if (fieldParts === 0) settle();
    stream.on('data', (chunk: Buffer) => {
      source.push(new Uint8Array(chunk).slice().buffer, false);
    });
    stream.on('end', () => {
      source.push(new ArrayBuffer(0), true);
      settleDone();
    });
  });
  parser.on('error', (error: unknown) =>
    fail(s3Error('MalformedPOSTRequest', error instanceof Error ? error.message : undefined)),
  );
  parser.on('close', () => {
    if (!fileSeen)
      fail(s3Error('InvalidArgument', 'POST requires exactly one file upload per request'));
  });
  exchange.onAbort(() => fail(s3Error('IncompleteBody', 'the client went away')));
  let discarding = false;
  exchange.onBody((chunk, isLast) => {
    if (discarding) return;
    const bytes = Buffer.from(chunk.slice(0));
    // The bytes before the file are kept (the file's offset is found in them): a chunk is kept
    // before the parser sees it, and the limit applies once it is known the file did not begin.
    if (!fileSeen) {
      rawBytes += bytes.byteLength;
      raw.push(bytes);
    }
    try {
      parser.write(bytes);
      if (isLast) parser.end();
    } catch (error) {
      fail(s3Error('MalformedPOSTRequest', error instanceof Error ? error.message : undefined));
    }
    if (!fileSeen && rawBytes > PRE_FILE_BYTES_MAX)
      fail(s3Error('MaxPostPreDataLengthExceededError'));
  });
  const discard = (): void => {
    if (discarding) return;
    discarding = true;
    // The parser is left unfed (destroying it would fail the part streams it has open).
    source.abort();
    exchange.resumeReading();
  };
  return { form, done, discard };
}

/** The offset of the file part's first data byte in `head` (the body before it), or -1. */
function fileDataStart(head: Buffer, marker: string): number {
  const delimiter = Buffer.from(`--${marker}`);
  let at = head.indexOf(delimiter);
  while (at >= 0) {
    const end = head.indexOf('\r\n\r\n', at);
    if (end < 0) return -1;
    const headers = head.subarray(at, end).toString('latin1');
    if (/;\s*name="?file"?(;|\s|$)/i.test(headers)) return end + 4;
    at = head.indexOf(delimiter, end);
  }
  return -1;
}

/** Authenticates the form, checks its policy, authorizes and stores the file. */
async function store(
  request: S3Request,
  form: Form,
  fileLength: number,
  source: FileSource,
): Promise<{ etag: string; key: string; versionId?: string | undefined }> {
  const { fields } = form;
  const bucketName = request.address.bucket ?? '';
  const key = (fields.get('key') ?? '').replace(/\$\{filename\}/g, form.filename);
  if (!fields.has('key'))
    throw s3Error('InvalidArgument', 'Bucket POST must contain a field named key');
  validateObjectKey(key);
  const principal = authenticateForm(request, fields);
  if (fields.has('policy')) checkPolicy(fields, { bucket: bucketName, key, fileLength });
  if (fileLength < 0) throw s3Error('MalformedPOSTRequest', 'the body is shorter than its parts');
  const posted: S3Request = {
    ...request,
    principal,
    requirePrincipal: () => actingPrincipal(posted),
  };
  if (principal) {
    request.exchange.audit.actor = principal.accessKeyId.slice(0, 64);
    request.exchange.audit.tenantId = principal.tenant.id;
  }
  const acting = posted.requirePrincipal();
  const bucket = bucketFor(posted, { verb: 'write', key });
  const headers: Record<string, string> = {};
  for (const [name, value] of fields) headers[name] = value;
  if (fields.has('acl')) headers['x-amz-acl'] = fields.get('acl') ?? '';
  const representation = withRequestedAcl(posted, representationOf(headers), headers);
  const objects = new ObjectService(request.services);
  const encryption = formEncryptionOf(posted, fields, acting.tenant);
  let version;
  try {
    version = await objects.putObject(
      contextOf(request.exchange, acting),
      {
        bucket,
        key,
        contentLength: fileLength,
        expected: new Map(),
        metadata: { ...representation.metadata },
        contentType: representation.contentType,
        idempotency: undefined,
        conditions: {},
        digests: ['MD5'],
        headers: representation.headers,
        attributes: { sse: encryption.sse },
        customerKey: encryption.customerKey,
      },
      source,
    );
  } catch (error) {
    if (isLightwellError(error) && error.code === 'bad_request' && !error.details['s3Code'])
      throw s3Error('MalformedPOSTRequest', 'the file is not the last part of the form');
    throw error;
  }
  return {
    etag: version.etag,
    key,
    versionId: bucket.versioning === 'Unversioned' ? undefined : version.versionId,
  };
}

/** The form's signer, or undefined for an unsigned (anonymous) form. */
function authenticateForm(
  request: S3Request,
  fields: ReadonlyMap<string, string>,
): S3Principal | undefined {
  const policy = fields.get('policy');
  const v4 = fields.get('x-amz-signature');
  const v2 = fields.get('signature');
  if (policy === undefined) {
    if (v4 !== undefined || v2 !== undefined)
      throw s3Error('InvalidArgument', 'a signed POST needs its policy');
    return undefined;
  }
  if (v4 !== undefined) {
    if (fields.get('x-amz-algorithm') !== 'AWS4-HMAC-SHA256')
      throw s3Error('InvalidArgument', 'x-amz-algorithm must be AWS4-HMAC-SHA256');
    const parts = (fields.get('x-amz-credential') ?? '').split('/');
    const [accessKeyId = '', date = '', region = '', service = '', terminal] = parts;
    if (parts.length !== 5 || terminal !== 'aws4_request' || !/^\d{8}$/.test(date))
      throw s3Error(
        'InvalidArgument',
        'x-amz-credential must be AccessKeyId/YYYYMMDD/region/s3/aws4_request',
      );
    if (region !== request.services.settings.string('s3.region') || service !== 's3')
      throw s3Error('InvalidArgument', 'the credential names another region or service');
    const credential = liveCredential(accessKeyId, request.services);
    const key = signingKey(credential.secretKey, { accessKeyId, date, region, service });
    if (!signatureMatches(hmacHex(key, policy), v4)) throw s3Error('SignatureDoesNotMatch');
    return credential.principal;
  }
  const accessKeyId = fields.get('awsaccesskeyid');
  if (v2 === undefined || accessKeyId === undefined)
    throw s3Error('InvalidArgument', 'a POST with a policy needs its signature and key id');
  const credential = liveCredential(accessKeyId, request.services);
  const expected = createHmac('sha1', credential.secretKey).update(policy).digest('base64');
  if (!signatureMatches(expected, v2)) throw s3Error('SignatureDoesNotMatch');
  return credential.principal;
}

/** Fields a policy need not name. */
const UNCHECKED_FIELDS = new Set([
  'file',
  'policy',
  'x-amz-signature',
  'signature',
  'awsaccesskeyid',
  'x-amz-security-token',
]);

function policyRefusal(message: string): Error {
  return s3Error('AccessDenied', `Invalid according to Policy: ${message}`);
}

/** Checks the form against its policy document. */
function checkPolicy(
  fields: ReadonlyMap<string, string>,
  target: { bucket: string; key: string; fileLength: number },
): void {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(fields.get('policy') ?? '', 'base64').toString('utf8'));
  } catch {
    throw s3Error('InvalidPolicyDocument', 'the policy is not base64 JSON');
  }
  const policy = doc as { expiration?: unknown; conditions?: unknown } | null;
  if (typeof policy !== 'object' || policy === null)
    throw s3Error('InvalidPolicyDocument', 'the policy is not a JSON object');
  if (typeof policy.expiration !== 'string')
    throw s3Error('InvalidPolicyDocument', 'Policy missing expiration');
  const expires = Date.parse(policy.expiration);
  if (Number.isNaN(expires) || !/^\d{4}-\d{2}-\d{2}T/.test(policy.expiration))
    throw s3Error('InvalidPolicyDocument', 'expiration is not an ISO 8601 date');
  if (expires < Date.now()) throw policyRefusal('Policy expired.');
  if (!Array.isArray(policy.conditions) || policy.conditions.length === 0)
    throw s3Error('InvalidPolicyDocument', 'Policy missing conditions');
  const value = (name: string): string | undefined => {
    if (name === 'bucket') return target.bucket;
    if (name === 'key') return target.key;
    return fields.get(name);
  };
  const covered = new Set<string>(['bucket']);
  for (const condition of policy.conditions as unknown[])
    checkCondition(condition, value, covered, target.fileLength);
  for (const name of fields.keys())
    if (!UNCHECKED_FIELDS.has(name) && !name.startsWith('x-ignore-') && !covered.has(name))
      throw policyRefusal(`Extra input fields: ${name.slice(0, 64)}`);
}

function checkCondition(
  condition: unknown,
  value: (name: string) => string | undefined,
  covered: Set<string>,
  fileLength: number,
): void {
  if (typeof condition === 'object' && condition !== null && !Array.isArray(condition)) {
    const entries = Object.entries(condition as Record<string, unknown>);
    if (entries.length !== 1) throw s3Error('InvalidPolicyDocument', 'a condition names one field');
    const [name = '', expected] = entries[0] ?? [];
    return checkMatch('eq', name, expected, value, covered);
  }
  if (!Array.isArray(condition) || condition.length !== 3)
    throw s3Error('InvalidPolicyDocument', 'a condition is an object or a three-element list');
  const [operator, first, second] = condition as [unknown, unknown, unknown];
  // Operators are matched in any case (AWS's); field names too, below.
  const op = typeof operator === 'string' ? operator.toLowerCase() : operator;
  if (op === 'content-length-range') {
    const min = Number(first);
    const max = Number(second);
    if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || min < 0)
      throw s3Error('InvalidPolicyDocument', 'content-length-range takes two whole numbers');
    if (fileLength > max) throw s3Error('EntityTooLarge');
    if (fileLength < min) throw s3Error('EntityTooSmall');
    return;
  }
  if (op !== 'eq' && op !== 'starts-with')
    throw s3Error('InvalidPolicyDocument', `unknown condition ${String(operator).slice(0, 32)}`);
  if (typeof first !== 'string' || !first.startsWith('$'))
    throw s3Error('InvalidPolicyDocument', 'a condition names its field as $field');
  checkMatch(op, first.slice(1), second, value, covered);
}

function checkMatch(
  operator: 'eq' | 'starts-with',
  rawName: string,
  expected: unknown,
  value: (name: string) => string | undefined,
  covered: Set<string>,
): void {
  const name = rawName.toLowerCase();
  if (typeof expected !== 'string')
    throw s3Error('InvalidPolicyDocument', `the value of the ${name} condition must be a string`);
  covered.add(name);
  // `["starts-with", "$field", ""]` allows any content (AWS's words), none included: forms that
  // leave out an optional field (x-amz-server-side-encryption) pass such a policy.
  const actual = value(name) ?? (operator === 'starts-with' && expected === '' ? '' : undefined);
  const ok =
    actual !== undefined && (operator === 'eq' ? actual === expected : actual.startsWith(expected));
  if (!ok) throw policyRefusal(`Policy Condition failed: ["${operator}", "$${name}", ...]`);
}

function answer(
  request: S3Request,
  form: Form,
  outcome: { etag: string; key: string; versionId?: string | undefined },
): void {
  const { fields } = form;
  const bucket = request.address.bucket ?? '';
  const etag = `"${outcome.etag}"`;
  const headers: Record<string, string> = { ETag: etag };
  if (outcome.versionId !== undefined) headers['x-amz-version-id'] = outcome.versionId;
  const redirect = fields.get('success_action_redirect') ?? fields.get('redirect');
  if (redirect !== undefined && /^https?:\/\//i.test(redirect)) {
    const url = new URL(redirect);
    url.searchParams.set('bucket', bucket);
    url.searchParams.set('key', outcome.key);
    url.searchParams.set('etag', etag);
    request.send(303, { ...headers, Location: url.toString() });
    return;
  }
  const status = fields.get('success_action_status');
  if (status === '201') {
    const location = `/${encodeURIComponent(bucket)}/${encodeURIComponent(outcome.key)}`;
    const xml = new XmlWriter()
      .start('PostResponse', false)
      .leaf('Location', location)
      .leaf('Bucket', bucket)
      .leaf('Key', outcome.key)
      .leaf('ETag', etag)
      .end('PostResponse');
    request.sendXml(201, xml, headers);
    return;
  }
  request.send(status === '200' ? 200 : 204, headers);
}
