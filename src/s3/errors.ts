// S3's errors: the codes and statuses the S3-compatible API answers with, and the mapping of
// Lightwell's own error codes (src/util/errors.ts) to them.
//
// An S3 error is a LightwellError whose `details.s3Code` names the S3 code; its `code` is the
// nearest Lightwell problem code, so that logs and audit rows stay in one vocabulary. Errors
// raised below the S3 adapter (the engine, the service, the upload pipeline) carry only a
// Lightwell code; `s3ErrorOf` maps them, using what the request addressed (a bucket, a key) to
// pick between, for example, `NoSuchBucket` and `NoSuchKey`. Nothing here writes a response
// (see render.ts).
//
// Persists: nothing.

import { LightwellError, errorCode, isLightwellError } from '../util/errors.js';

/** An S3 error code with its HTTP status and the Lightwell code it stands beside. */
interface S3CodeSpec {
  readonly status: number;
  readonly lightwell: string;
  readonly message: string;
}

/**
 * The S3 codes Lightwell answers with, from the AWS S3 API reference's "Error responses"
 * list (statuses as AWS sends them).
 */
const codes = {
  AccessDenied: { status: 403, lightwell: 'forbidden', message: 'Access Denied' },
  AccountProblem: { status: 403, lightwell: 'forbidden', message: 'The account is disabled' },
  AuthorizationHeaderMalformed: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The authorization header is malformed',
  },
  AuthorizationQueryParametersError: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The authorization query parameters are malformed',
  },
  BadDigest: {
    status: 400,
    lightwell: 'checksum_mismatch',
    message: 'The Content-MD5 you specified did not match what was received',
  },
  BucketAlreadyExists: {
    status: 409,
    lightwell: 'conflict',
    message: 'The requested bucket name is not available',
  },
  BucketAlreadyOwnedByYou: {
    status: 409,
    lightwell: 'conflict',
    message: 'Your previous request to create the named bucket succeeded and you already own it',
  },
  BucketNotEmpty: {
    status: 409,
    lightwell: 'bucket_not_empty',
    message: 'The bucket you tried to delete is not empty',
  },
  EntityTooLarge: {
    status: 400,
    lightwell: 'payload_too_large',
    message: 'Your proposed upload exceeds the maximum allowed object size',
  },
  EntityTooSmall: {
    status: 400,
    lightwell: 'bad_request',
    message: 'Your proposed upload is smaller than the minimum allowed object size',
  },
  ExpiredToken: { status: 400, lightwell: 'bad_request', message: 'The token has expired' },
  IllegalLocationConstraintException: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The location constraint does not name this region',
  },
  IncompleteBody: {
    status: 400,
    lightwell: 'bad_request',
    message: 'You did not provide the number of bytes specified by the Content-Length header',
  },
  InternalError: {
    status: 500,
    lightwell: 'internal',
    message: 'We encountered an internal error',
  },
  InvalidAccessKeyId: {
    status: 403,
    lightwell: 'unauthorized',
    message: 'The AWS access key Id you provided does not exist in our records',
  },
  InvalidArgument: { status: 400, lightwell: 'bad_request', message: 'Invalid Argument' },
  'KMS.NotFoundException': { status: 400, lightwell: 'bad_request', message: 'Invalid keyId' },
  AccessControlListNotSupported: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The bucket does not allow ACLs',
  },
  InvalidBucketAclWithObjectOwnership: {
    status: 400,
    lightwell: 'bad_request',
    message: 'Bucket cannot have ACLs set with ObjectOwnership BucketOwnerEnforced',
  },
  OwnershipControlsNotFoundError: {
    status: 404,
    lightwell: 'not_found',
    message: 'The bucket ownership controls were not found',
  },
  InvalidTargetBucketForLogging: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The target bucket for logging does not exist or is not fit for logging',
  },
  InvalidBucketName: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The specified bucket is not valid',
  },
  InvalidBucketState: {
    status: 409,
    lightwell: 'conflict',
    message: 'The request is not valid with the current state of the bucket',
  },
  InvalidDigest: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The Content-MD5 you specified is not valid',
  },
  InvalidPart: {
    status: 400,
    lightwell: 'bad_request',
    message: 'One or more of the specified parts could not be found',
  },
  InvalidPartOrder: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The list of parts was not in ascending order',
  },
  InvalidRange: {
    status: 416,
    lightwell: 'invalid_range',
    message: 'The requested range is not satisfiable',
  },
  InvalidRequest: { status: 400, lightwell: 'bad_request', message: 'Invalid Request' },
  InvalidRetentionPeriod: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The retention period must be a positive whole number of days or years',
  },
  InvalidStorageClass: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The storage class you specified is not valid',
  },
  InvalidTag: { status: 400, lightwell: 'bad_request', message: 'The tag provided was not valid' },
  InvalidURI: {
    status: 400,
    lightwell: 'bad_request',
    message: "Couldn't parse the specified URI",
  },
  InvalidObjectState: {
    status: 403,
    lightwell: 'forbidden',
    message: 'The operation is not valid for the current state of the object',
  },
  KeyTooLongError: { status: 400, lightwell: 'bad_request', message: 'Your key is too long' },
  MalformedXML: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The XML you provided was not well-formed or did not validate against our schema',
  },
  MaxMessageLengthExceeded: {
    status: 400,
    lightwell: 'payload_too_large',
    message: 'Your request was too big',
  },
  MetadataTooLarge: {
    status: 400,
    lightwell: 'bad_request',
    message: 'Your metadata headers exceed the maximum allowed metadata size',
  },
  MethodNotAllowed: {
    status: 405,
    lightwell: 'method_not_allowed',
    message: 'The specified method is not allowed against this resource',
  },
  MissingContentLength: {
    status: 411,
    lightwell: 'bad_request',
    message: 'You must provide the Content-Length HTTP header',
  },
  MissingSecurityHeader: {
    status: 400,
    lightwell: 'bad_request',
    message: 'Your request is missing a required header',
  },
  NoSuchBucket: {
    status: 404,
    lightwell: 'not_found',
    message: 'The specified bucket does not exist',
  },
  NoSuchKey: { status: 404, lightwell: 'not_found', message: 'The specified key does not exist' },
  NoSuchObjectLockConfiguration: {
    status: 404,
    lightwell: 'not_found',
    message: 'The specified object does not have an ObjectLock configuration',
  },
  NoSuchTagSet: { status: 404, lightwell: 'not_found', message: 'There is no tag set' },
  NoSuchLifecycleConfiguration: {
    status: 404,
    lightwell: 'not_found',
    message: 'The lifecycle configuration does not exist',
  },
  NoSuchUpload: {
    status: 404,
    lightwell: 'not_found',
    message: 'The specified multipart upload does not exist',
  },
  NoSuchVersion: {
    status: 404,
    lightwell: 'not_found',
    message: 'The specified version does not exist',
  },
  NotImplemented: {
    status: 501,
    lightwell: 'not_implemented',
    message: 'A header or operation you provided implies functionality that is not implemented',
  },
  NotModified: { status: 304, lightwell: 'precondition_failed', message: 'Not Modified' },
  ObjectLockConfigurationNotFoundError: {
    status: 404,
    lightwell: 'not_found',
    message: 'Object Lock configuration does not exist for this bucket',
  },
  PreconditionFailed: {
    status: 412,
    lightwell: 'precondition_failed',
    message: 'At least one of the preconditions you specified did not hold',
  },
  QuotaExceeded: {
    status: 403,
    lightwell: 'quota_exceeded',
    message: 'The tenant is over its storage quota',
  },
  RequestTimeTooSkewed: {
    status: 403,
    lightwell: 'forbidden',
    message: 'The difference between the request time and the server time is too large',
  },
  ServiceUnavailable: {
    status: 503,
    lightwell: 'unavailable',
    message: 'Please reduce your request rate',
  },
  ServerSideEncryptionConfigurationNotFoundError: {
    status: 404,
    lightwell: 'not_found',
    message: 'The server side encryption configuration was not found',
  },
  SignatureDoesNotMatch: {
    status: 403,
    lightwell: 'unauthorized',
    message:
      'The request signature we calculated does not match the signature you provided. ' +
      'Check your key and signing method.',
  },
  SlowDown: { status: 503, lightwell: 'unavailable', message: 'Please reduce your request rate' },
  XAmzContentSHA256Mismatch: {
    status: 400,
    lightwell: 'checksum_mismatch',
    message: "The provided 'x-amz-content-sha256' header does not match what was computed",
  },
  XAmzContentChecksumMismatch: {
    status: 400,
    lightwell: 'checksum_mismatch',
    message: 'The checksum you specified did not match what was received',
  },
  // Access control, CORS and browser uploads (src/s3/access-ops.ts, cors.ts, post-object.ts).
  MalformedPolicy: {
    status: 400,
    lightwell: 'bad_request',
    message: 'Policies must be valid JSON',
  },
  MalformedACLError: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The XML you provided was not well-formed or did not validate against our schema',
  },
  UnresolvableGrantByEmailAddress: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The e-mail address you provided does not match any account on record',
  },
  NoSuchBucketPolicy: {
    status: 404,
    lightwell: 'not_found',
    message: 'The bucket policy does not exist',
  },
  NoSuchPublicAccessBlockConfiguration: {
    status: 404,
    lightwell: 'not_found',
    message: 'The public access block configuration was not found',
  },
  NoSuchCORSConfiguration: {
    status: 404,
    lightwell: 'not_found',
    message: 'The CORS configuration does not exist',
  },
  CORSForbidden: {
    status: 403,
    lightwell: 'forbidden',
    message: 'CORSResponse: This CORS request is not allowed',
  },
  InvalidPolicyDocument: {
    status: 400,
    lightwell: 'bad_request',
    message:
      'The content of the form does not meet the conditions specified in the policy document',
  },
  MalformedPOSTRequest: {
    status: 400,
    lightwell: 'bad_request',
    message: 'The body of your POST request is not well-formed multipart/form-data',
  },
  MaxPostPreDataLengthExceededError: {
    status: 400,
    lightwell: 'bad_request',
    message: 'Your POST request fields preceding the upload file were too large',
  },
} as const satisfies Record<string, S3CodeSpec>;

export type S3Code = keyof typeof codes;

/** Every S3 code this adapter can answer with (for docs/s3.md and its test). */
export const S3_CODES: readonly S3Code[] = Object.freeze(Object.keys(codes) as S3Code[]);

/** An S3 error: `s3Error('NoSuchBucket')`, with an optional message of its own. */
export function s3Error(
  code: S3Code,
  message?: string,
  details: Record<string, unknown> = {},
): LightwellError {
  const spec: S3CodeSpec = codes[code];
  return new LightwellError(
    { code: spec.lightwell, title: code, status: spec.status },
    message ?? spec.message,
    { ...details, s3Code: code },
  );
}

/** What an S3 error response says: its code, status and message. */
export interface S3Problem {
  readonly code: string;
  readonly status: number;
  readonly message: string;
}

/** What the request addressed, to name the missing thing in a `not_found`. */
export interface S3Target {
  readonly bucket?: string | undefined;
  readonly key?: string | undefined;
}

/**
 * The S3 answer for any error: an S3 error as it is; a Lightwell error by its code; anything
 * else (a bug) an `InternalError` without details.
 */
export function s3ErrorOf(error: unknown, target: S3Target): S3Problem {
  if (!isLightwellError(error)) return problem('InternalError');
  const own = error.details['s3Code'];
  if (typeof own === 'string' && own in codes) {
    const spec: S3CodeSpec = codes[own as S3Code];
    return { code: own, status: spec.status, message: error.message };
  }
  const mapped = mappedCode(errorCode(error) ?? 'internal', error.message, target);
  // A failure of the service never shows its details.
  if (codes[mapped].status >= 500 && mapped !== 'NotImplemented' && mapped !== 'SlowDown')
    return problem(mapped);
  return { code: mapped, status: codes[mapped].status, message: error.message };
}

/**
 * The headers an S3 error answer carries beside its XML: a read that met a delete marker says so
 * (`x-amz-delete-marker`, the marker's `x-amz-version-id`), on the 404 of a key whose latest
 * version is one and on the 405 of a marker named by its id; a 405 names what is allowed.
 */
export function s3ErrorHeaders(error: unknown, status: number): Record<string, string> {
  const headers: Record<string, string> = {};
  const details = isLightwellError(error) ? error.details : {};
  const marker = details['deleteMarkerVersionId'];
  if (typeof marker === 'string' && (status === 404 || status === 405)) {
    headers['x-amz-delete-marker'] = 'true';
    headers['x-amz-version-id'] = marker;
  }
  if (status === 405) {
    const allow = details['allow'];
    headers['Allow'] = typeof allow === 'string' ? allow : 'GET, HEAD, PUT, POST, DELETE';
  }
  return headers;
}

function problem(code: S3Code): S3Problem {
  return { code, status: codes[code].status, message: codes[code].message };
}

function mappedCode(code: string, message: string, target: S3Target): S3Code {
  switch (code) {
    case 'not_found':
      if (target.key === undefined || /^bucket /.test(message)) return 'NoSuchBucket';
      if (/version/i.test(message)) return 'NoSuchVersion';
      if (/upload/i.test(message)) return 'NoSuchUpload';
      return 'NoSuchKey';
    case 'bad_request':
      return 'InvalidRequest';
    case 'unauthorized':
    case 'forbidden':
    case 'tls_required':
      return 'AccessDenied';
    case 'method_not_allowed':
      return 'MethodNotAllowed';
    case 'conflict':
      return 'InvalidBucketState';
    case 'bucket_not_empty':
      return 'BucketNotEmpty';
    case 'precondition_failed':
      return 'PreconditionFailed';
    case 'invalid_range':
      return 'InvalidRange';
    case 'checksum_mismatch':
      return 'BadDigest';
    case 'payload_too_large':
      return 'EntityTooLarge';
    case 'quota_exceeded':
      return 'QuotaExceeded';
    case 'not_implemented':
      return 'NotImplemented';
    case 'rate_limited':
    case 'unavailable':
    case 'engine_unavailable':
    case 'chunk_gone':
      return 'SlowDown';
    default:
      return 'InternalError';
  }
}
