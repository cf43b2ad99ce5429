// Access-key scopes (admin-api.md §2, "Scope syntax"): parsing, canonical formatting and the
// authorization check every data-plane operation makes.
//
// Syntax: either a comma-separated list of verbs from read, write, delete, admin
// (`read,write`), or a comma-separated list of resource entries
// `op=<verb>:bucket=<bucket>[:prefix=<prefix>]` (the spec writes the prefix; it may be left out).
// The two forms never mix.
// - `bucket=*` means every bucket; otherwise the bucket follows S3's bucket-name rules.
// - An omitted or empty prefix means every key. The prefix is the rest of the entry up to the
//   next comma, taken verbatim: it may contain ':' and spaces, but not ','.
// - Whitespace before an item is ignored, and after an item too unless it ends in a prefix
//   (there it is part of the prefix). Empty items (`read,,write`, a trailing comma) are refused.
//
// Semantics (deny by default; `allows` is the only way to say yes):
// - A verb list grants its verbs on every bucket and key of the tenant.
// - An entry grants its verb on its bucket (or all buckets) for keys that start with its prefix.
// - `admin` implies read, write and delete wherever it is granted (on the entry's resource for
//   an entry).
// - Bucket-level operations pass a bucket and no key. An entry with a prefix grants them only
//   when the request is a listing whose `listPrefix` starts with the entry's prefix, so a
//   prefix-limited key can list inside its prefix but cannot create, delete or configure the
//   bucket. Tenant-level operations (no bucket) are granted only by a verb list or an entry
//   with `bucket=*` and no prefix.
//
// Canonical form (what `formatScopes` writes and `parseScopes` returns): the caller's verbs or
// entries in the caller's order, without repeats, each entry in the spec's full form
// `op=<verb>:bucket=<bucket>:prefix=<prefix>` (an empty prefix written as `:prefix=`), so that
// what a client sends in the spec's syntax comes back as sent. parseScopes(formatScopes(s))
// deep-equals s for every s that parseScopes returns.
//
// Persists: nothing itself; callers store the canonical text.

import assert from 'node:assert/strict';
import { BadRequest, isLightwellError } from '../util/errors.js';
import { validateBucketName, validateObjectKey } from './names.js';

export const VERBS = ['read', 'write', 'delete', 'admin'] as const;
export type Verb = (typeof VERBS)[number];

/** Longest scope text accepted. */
export const SCOPES_CHARS_MAX = 16_384;
/** Most resource entries in one scope. */
export const SCOPE_ENTRIES_MAX = 64;
export const SCOPE_BUCKET_ANY = '*';

export interface ScopeEntry {
  readonly verb: Verb;
  /** A bucket name or '*' for every bucket. */
  readonly bucket: string;
  /** Keys must start with this; '' means every key. */
  readonly prefix: string;
}

export type Scope =
  | { readonly kind: 'verbs'; readonly verbs: readonly Verb[] }
  | { readonly kind: 'resources'; readonly entries: readonly ScopeEntry[] };

export interface ScopeRequest {
  readonly verb: Verb;
  /** Absent for tenant-level operations such as listing buckets. */
  readonly bucket?: string | undefined;
  /** Absent for bucket-level operations (create, delete, configure or list a bucket). */
  readonly key?: string | undefined;
  /** For a listing: the prefix of the listed keys ('' or absent lists everything). */
  readonly listPrefix?: string | undefined;
}

export interface SignedUrlResource {
  readonly bucket: string;
  /** The exact object key. */
  readonly key?: string | undefined;
  /** PUT only: the browser chooses a key starting with this. */
  readonly keyPrefix?: string | undefined;
}

const entryPattern = /^op=([^:]*):bucket=([^:]*)(?::prefix=([\s\S]*))?$/;
const entryShape = 'op=<verb>:bucket=<bucket>:prefix=<prefix>';

function isVerb(text: unknown): text is Verb {
  return (VERBS as readonly unknown[]).includes(text);
}

/** Parses scope text into its canonical form, or throws bad_request saying what is wrong. */
export function parseScopes(text: unknown): Scope {
  if (typeof text !== 'string') throw BadRequest('scopes must be a string');
  if (text.length > SCOPES_CHARS_MAX) {
    throw BadRequest(`scopes are longer than ${SCOPES_CHARS_MAX} characters`);
  }
  if (text.trim() === '') {
    throw BadRequest(
      `scopes must not be empty: give verbs such as read,write or entries such as ${entryShape}`,
    );
  }
  const items = text.split(',').map((item, index, all) => {
    const position = all.length === 1 ? 'scope' : `scope item ${index + 1}`;
    const stripped = item.trimStart();
    if (stripped.trimEnd() === '') throw BadRequest(`${position} is empty`);
    return { position, stripped, isEntry: stripped.includes('=') || stripped.includes(':') };
  });
  if (items.some((item) => item.isEntry) && items.some((item) => !item.isEntry)) {
    throw BadRequest(
      'scopes must be either a list of verbs (read,write) or a list of resource entries ' +
        `(${entryShape}), not a mix of both`,
    );
  }
  const entryCount = items.filter((item) => item.isEntry).length;
  if (entryCount > SCOPE_ENTRIES_MAX) {
    throw BadRequest(`scopes have ${entryCount} entries; the limit is ${SCOPE_ENTRIES_MAX}`);
  }
  const verbs: Verb[] = [];
  const entries: ScopeEntry[] = [];
  for (const { position, stripped, isEntry } of items) {
    if (isEntry) entries.push(parseEntry(stripped, position));
    else verbs.push(parseVerb(stripped.trimEnd(), position));
  }
  const scope: Scope = verbs.length > 0 ? { kind: 'verbs', verbs } : { kind: 'resources', entries };
  return canonicalScope(scope);
}

function parseVerb(text: string, position: string): Verb {
  if (isVerb(text)) return text;
  throw BadRequest(
    `${position}: unknown verb ${quoteShort(text)}; expected read, write, delete or admin`,
  );
}

function parseEntry(text: string, position: string): ScopeEntry {
  const match = entryPattern.exec(text);
  if (match === null) {
    throw BadRequest(`${position} is malformed: expected ${entryShape} (prefix optional)`);
  }
  const [, verb = '', bucketRaw = '', prefixRaw] = match;
  if (!isVerb(verb)) {
    throw BadRequest(
      `${position}: unknown verb ${quoteShort(verb)} in op=; expected read, write, delete or admin`,
    );
  }
  // Without a prefix field the bucket ends the item, and bucket names hold no whitespace.
  const bucket = prefixRaw === undefined ? bucketRaw.trimEnd() : bucketRaw;
  if (bucket === '') {
    throw BadRequest(`${position}: bucket is missing; use bucket=* for every bucket`);
  }
  const prefix = prefixRaw ?? '';
  withPosition(position, () => {
    if (bucket !== SCOPE_BUCKET_ANY) validateBucketName(bucket);
    validateObjectKey(prefix, { allowEmpty: true });
  });
  return { verb, bucket, prefix };
}

function withPosition(position: string, check: () => void): void {
  try {
    check();
  } catch (error) {
    if (isLightwellError(error) && error.code === 'bad_request') {
      throw BadRequest(`${position}: ${error.message}`);
    }
    throw error;
  }
}

function quoteShort(text: string): string {
  return JSON.stringify(text.length <= 32 ? text : `${text.slice(0, 32)}…`);
}

function canonicalScope(scope: Scope): Scope {
  if (scope.kind === 'verbs') {
    assert.ok(scope.verbs.length > 0, 'a verb scope needs at least one verb');
    return { kind: 'verbs', verbs: [...new Set(scope.verbs)] };
  }
  assert.ok(scope.entries.length > 0, 'a resource scope needs at least one entry');
  const unique = new Map<string, ScopeEntry>();
  for (const entry of scope.entries) {
    unique.set(JSON.stringify([entry.bucket, entry.prefix, entry.verb]), {
      verb: entry.verb,
      bucket: entry.bucket,
      prefix: entry.prefix,
    });
  }
  return { kind: 'resources', entries: [...unique.values()] };
}

/** The canonical text of a scope (see the header comment). */
export function formatScopes(scope: Scope): string {
  const canonical = canonicalScope(scope);
  if (canonical.kind === 'verbs') return canonical.verbs.join(',');
  return canonical.entries
    .map((entry) => {
      assert.ok(isVerb(entry.verb), 'scope entry verb is not a verb');
      assert.ok(!entry.prefix.includes(','), 'a scope prefix cannot contain a comma');
      return `op=${entry.verb}:bucket=${entry.bucket}:prefix=${entry.prefix}`;
    })
    .join(',');
}

/** Whether `scope` grants `request`. Unknown verbs are never granted. */
export function allows(scope: Scope, request: ScopeRequest): boolean {
  if (!isVerb(request.verb)) return false;
  if (scope.kind === 'verbs') {
    return scope.verbs.includes(request.verb) || scope.verbs.includes('admin');
  }
  return scope.entries.some((entry) => entryGrants(entry, request));
}

/**
 * Whether `scope` lets its key read anything in `bucket`, under any prefix: which buckets a key
 * scoped to some of them sees in the bucket list. With no bucket given: in any bucket at all.
 */
export function readsIn(scope: Scope, bucket?: string): boolean {
  if (scope.kind === 'verbs') return scope.verbs.includes('read') || scope.verbs.includes('admin');
  return scope.entries.some(
    (entry) =>
      (entry.verb === 'read' || entry.verb === 'admin') &&
      (bucket === undefined || entry.bucket === SCOPE_BUCKET_ANY || entry.bucket === bucket),
  );
}

function entryGrants(entry: ScopeEntry, request: ScopeRequest): boolean {
  if (entry.verb !== request.verb && entry.verb !== 'admin') return false;
  if (request.bucket === undefined) {
    return request.key === undefined && entry.bucket === SCOPE_BUCKET_ANY && entry.prefix === '';
  }
  if (entry.bucket !== SCOPE_BUCKET_ANY && entry.bucket !== request.bucket) return false;
  if (request.key !== undefined) return request.key.startsWith(entry.prefix);
  if (entry.prefix === '') return true;
  return request.listPrefix !== undefined && request.listPrefix.startsWith(entry.prefix);
}

/**
 * Whether a key with `scope` may mint a signed URL for `method` (GET needs read, PUT needs
 * write; any other method: false). Without `resource`: whether it may mint such a URL for
 * anything at all. With it: whether it covers that exact key or, for a keyPrefix, every key
 * under that prefix. Giving both key and keyPrefix, or neither, is false; callers validate the
 * request first (a keyPrefix on a GET is the caller's 400, not this function's).
 */
export function canMintSignedUrl(
  scope: Scope,
  method: string,
  resource?: SignedUrlResource,
): boolean {
  const verb: Verb | undefined = method === 'GET' ? 'read' : method === 'PUT' ? 'write' : undefined;
  if (verb === undefined) return false;
  if (resource === undefined) {
    if (scope.kind === 'verbs') return allows(scope, { verb });
    return scope.entries.some((entry) => entry.verb === verb || entry.verb === 'admin');
  }
  const { bucket, key, keyPrefix } = resource;
  if ((key === undefined) === (keyPrefix === undefined)) return false;
  // Every key under keyPrefix starts with an entry's prefix exactly when keyPrefix itself does.
  return allows(scope, { verb, bucket, key: key ?? keyPrefix });
}
