// Goal: formatScopes and parseScopes round-trip every scope; arbitrary input to parseScopes
// gives a scope or bad_request and nothing else; and `allows` agrees with a direct reading of
// the rules.
// Method: fast-check over generated scopes (valid bucket names, '*', prefixes of any Unicode
// without commas or NUL), arbitrary strings, and random requests. The seed is printed and
// FC_SEED replays it.
import t from 'tap';
import fc from 'fast-check';
import { errorCode } from '../../src/util/errors.js';
import { validateBucketName } from '../../src/security/names.js';
import {
  VERBS,
  allows,
  formatScopes,
  parseScopes,
  type Scope,
  type ScopeEntry,
  type ScopeRequest,
} from '../../src/security/scopes.js';

const seed = Number(process.env['FC_SEED'] ?? Date.now() % 2 ** 31);
t.comment(`fast-check seed ${seed} (replay with FC_SEED=${seed})`);

function isBucketName(text: string): boolean {
  try {
    validateBucketName(text);
    return true;
  } catch {
    return false;
  }
}

const verb = fc.constantFrom(...VERBS);
const bucketName = fc.stringMatching(/^[a-z0-9][a-z0-9.-]{1,12}[a-z0-9]$/).filter(isBucketName);
const bucket = fc.oneof(fc.constant('*'), bucketName, fc.constantFrom('b1a', 'b2a'));
const prefix = fc
  .oneof(
    fc.string({ unit: 'binary', maxLength: 30 }),
    fc.constantFrom('', 'a', 'a/', 'a/b', ' x ', 'p:q=r', ':prefix=z'),
  )
  .filter((p) => !p.includes(',') && !p.includes('\0'));
const entry: fc.Arbitrary<ScopeEntry> = fc.record({ verb, bucket, prefix });
const scope: fc.Arbitrary<Scope> = fc.oneof(
  fc
    .array(verb, { minLength: 1, maxLength: 6 })
    .map((verbs) => ({ kind: 'verbs' as const, verbs })),
  fc
    .array(entry, { minLength: 1, maxLength: 8 })
    .map((entries) => ({ kind: 'resources' as const, entries })),
);

function entrySet(s: Scope): Set<string> {
  if (s.kind === 'verbs') return new Set(s.verbs);
  return new Set(s.entries.map((e) => JSON.stringify([e.verb, e.bucket, e.prefix])));
}

t.test('parseScopes(formatScopes(x)) is x in canonical form', async (t) => {
  fc.assert(
    fc.property(scope, (x) => {
      const text = formatScopes(x);
      const parsed = parseScopes(text);
      // Same grants, the same canonical text, and parsing is a fixed point.
      const sameKind = parsed.kind === x.kind;
      const a = entrySet(parsed);
      const b = entrySet(x);
      const sameSet = a.size === b.size && [...a].every((item) => b.has(item));
      const stable = formatScopes(parsed) === text;
      const fixed = JSON.stringify(parseScopes(formatScopes(parsed))) === JSON.stringify(parsed);
      return sameKind && sameSet && stable && fixed;
    }),
    { seed, numRuns: 2000 },
  );
  t.pass('round trip holds');
});

t.test('arbitrary input gives a scope or bad_request', async (t) => {
  const pieces = fc.constantFrom(
    ...['op=', 'bucket=', 'prefix=', ':', ',', 'read', 'admin', '*', 'b1a', ' ', '=', 'x'],
  );
  const scopeish = fc.array(pieces, { maxLength: 12 }).map((parts) => parts.join(''));
  const anyString = fc.string({ unit: 'binary', maxLength: 100 });
  fc.assert(
    fc.property(fc.oneof(anyString, scopeish, fc.anything()), (input) => {
      try {
        const parsed = parseScopes(input);
        return JSON.stringify(parseScopes(formatScopes(parsed))) === JSON.stringify(parsed);
      } catch (error) {
        return errorCode(error) === 'bad_request';
      }
    }),
    { seed, numRuns: 3000 },
  );
  t.pass('only bad_request');
});

/** The rules read directly, for comparison. */
function expected(s: Scope, r: ScopeRequest): boolean {
  if (s.kind === 'verbs') return s.verbs.includes('admin') || s.verbs.includes(r.verb);
  return s.entries.some((e) => {
    const verbOk = e.verb === 'admin' || e.verb === r.verb;
    if (!verbOk) return false;
    if (r.bucket === undefined) return r.key === undefined && e.bucket === '*' && e.prefix === '';
    const bucketOk = e.bucket === '*' || e.bucket === r.bucket;
    const within = r.key ?? r.listPrefix;
    if (r.key === undefined && e.prefix === '') return bucketOk;
    return bucketOk && within !== undefined && within.startsWith(e.prefix);
  });
}

t.test('allows agrees with the rules', async (t) => {
  const request: fc.Arbitrary<ScopeRequest> = fc.record(
    {
      verb,
      bucket: fc.constantFrom('b1a', 'b2a', 'other'),
      key: fc.constantFrom('', 'a', 'a/', 'a/b', 'x', ' x y'),
      listPrefix: fc.constantFrom('', 'a', 'a/', 'a/b'),
    },
    { requiredKeys: ['verb'] },
  );
  fc.assert(
    fc.property(scope, request, (s, r) => allows(s, r) === expected(s, r)),
    { seed, numRuns: 5000 },
  );
  t.pass('agrees');
});
