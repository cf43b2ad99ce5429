// The error catalogue: every operating error Lightwell can answer with, in one place.
//
// An operating error (not found, checksum mismatch, quota exceeded, disk full) is a
// LightwellError with a stable snake_case `code` and an HTTP status. A bug is an assertion
// failure and is never represented here. Callers match on `code`, never on `instanceof`,
// because errors cross thread and process boundaries as plain data (`toWire` / `fromWire`).
// `docs/errors.md` documents every code; a test keeps the two in step.

export interface ErrorDetails {
  readonly [field: string]: unknown;
}

export class LightwellError extends Error {
  readonly code: string;
  readonly status: number;
  readonly details: ErrorDetails;

  constructor(
    spec: { code: string; title: string; status: number },
    message?: string,
    details: ErrorDetails = {},
    options?: { cause?: unknown },
  ) {
    super(message ?? spec.title, options);
    this.name = 'LightwellError';
    this.code = spec.code;
    this.status = spec.status;
    this.details = details;
  }
}

export interface ErrorSpec {
  readonly code: string;
  readonly title: string;
  readonly status: number;
  /** Builds an error of this kind. */
  (message?: string, details?: ErrorDetails, options?: { cause?: unknown }): LightwellError;
}

const catalogue = new Map<string, ErrorSpec>();

export function defineError(code: string, title: string, status: number): ErrorSpec {
  if (catalogue.has(code))
    throw new LightwellError(
      { code: 'internal', title, status: 500 },
      `duplicate error code ${code}`,
    );
  const spec = Object.assign(
    (message?: string, details?: ErrorDetails, options?: { cause?: unknown }) =>
      new LightwellError({ code, title, status }, message, details, options),
    { code, title, status },
  ) as ErrorSpec;
  catalogue.set(code, spec);
  return spec;
}

/**
 * A `bad_request` answered with HTTP's more precise status (411, 431): the code stays in the
 * public list of spec/DECISIONS.md. Not in the catalogue, so such an error must not cross a
 * thread or process boundary (it would arrive as a plain 400); both are raised by the gateway
 * thread for the request it is reading.
 */
function badRequestWith(
  status: number,
  title: string,
): (message?: string, details?: ErrorDetails) => LightwellError {
  return (message, details) =>
    new LightwellError({ code: 'bad_request', title, status }, message, details);
}

/** Every defined error, for documentation and the catalogue test. */
export function errorCatalogue(): readonly ErrorSpec[] {
  return [...catalogue.values()];
}

// Public problem codes (spec/DECISIONS.md).
export const BadRequest = defineError('bad_request', 'Bad request', 400);
export const Unauthorized = defineError('unauthorized', 'Unauthorized', 401);
export const Forbidden = defineError('forbidden', 'Forbidden', 403);
export const NotFound = defineError('not_found', 'Not found', 404);
export const MethodNotAllowed = defineError('method_not_allowed', 'Method not allowed', 405);
export const Conflict = defineError('conflict', 'Conflict', 409);
export const BucketNotEmpty = defineError('bucket_not_empty', 'Bucket not empty', 409);
export const PreconditionFailed = defineError('precondition_failed', 'Precondition failed', 412);
export const InvalidRange = defineError('invalid_range', 'Range not satisfiable', 416);
export const ChecksumMismatch = defineError('checksum_mismatch', 'Checksum mismatch', 400);
export const IdempotencyKeyReused = defineError(
  'idempotency_key_reused',
  'Idempotency key reused',
  422,
);
export const IdempotencyKeyInUse = defineError(
  'idempotency_key_in_use',
  'Idempotency key in use',
  409,
);
export const PayloadTooLarge = defineError('payload_too_large', 'Payload too large', 413);
export const LengthRequired = badRequestWith(411, 'Length required');
export const HeadersTooLarge = badRequestWith(431, 'Request headers too large');
export const RateLimited = defineError('rate_limited', 'Too many requests', 429);
export const QuotaExceeded = defineError('quota_exceeded', 'Quota exceeded', 507);
export const NotImplemented = defineError('not_implemented', 'Not implemented', 501);
export const TlsRequired = defineError('tls_required', 'TLS required', 403);
export const Internal = defineError('internal', 'Internal error', 500);
export const Unavailable = defineError('unavailable', 'Service unavailable', 503);

// Operating errors of the storage layers. They reach clients as 500 or 503.
export const FormatError = defineError('format_error', 'Malformed persisted data', 500);
export const FormatTooNew = defineError(
  'format_too_new',
  'Data format newer than this release',
  500,
);
export const CorruptData = defineError('corrupt_data', 'Stored data failed verification', 500);
export const SegmentIoError = defineError('segment_io', 'Segment I/O failed', 500);
export const EngineUnavailable = defineError('engine_unavailable', 'Engine not reachable', 503);
export const DataDirLocked = defineError('data_dir_locked', 'Data directory in use', 500);
export const ChunkGone = defineError('chunk_gone', 'Deduplicated chunk was reclaimed', 503);
/** A replicated write placed under an older layout than the replica's (cluster fencing). */
export const StaleLayout = defineError('stale_layout', 'Placed under a stale layout', 503);
/** A replicated write carried a partition epoch below one the replica has seen (fencing). */
export const StaleEpoch = defineError('stale_epoch', 'Sent under a deposed leader epoch', 503);
/** A member lost, removed or unknown to the receiver sent a cluster write: it is fenced off. */
export const Fenced = defineError('fenced', 'Sent by a member fenced off the cluster', 503);
/** The data filesystem is full (ENOSPC): new writes are refused until space returns. */
export const DiskFull = defineError('disk_full', 'No space left for new data', 503);

// Operator and start-up failures: a process refuses to start, naming what to fix. Never a
// client's answer (an API that met one would answer `internal`).
export const InvalidSetting = defineError('invalid_setting', 'Invalid setting', 500);
export const DataDirUnusable = defineError('data_dir_unusable', 'Data directory unusable', 500);
export const MasterKeyMismatch = defineError(
  'master_key_mismatch',
  'Master key of another data directory',
  500,
);
export const MasterKeyUnusable = defineError('master_key_unusable', 'Master key unusable', 500);

/** The plain-data form of an error, safe for structured clone and msgpack. */
export interface WireError {
  readonly code: string;
  readonly message: string;
  readonly details?: ErrorDetails;
}

export function toWire(error: unknown): WireError {
  if (isLightwellError(error)) {
    return { code: error.code, message: error.message, details: error.details };
  }
  return { code: 'internal', message: 'internal error' };
}

export function fromWire(wire: WireError): LightwellError {
  const spec = catalogue.get(wire.code) ?? Internal;
  return spec(wire.message, wire.details ?? {});
}

export function isLightwellError(error: unknown): error is LightwellError {
  return error instanceof LightwellError;
}

export function errorCode(error: unknown): string | undefined {
  return isLightwellError(error) ? error.code : undefined;
}
