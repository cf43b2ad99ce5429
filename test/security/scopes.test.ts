// Goal: scope text parses to the canonical form the header of scopes.ts describes, every
// malformed input is refused with a message that says what is wrong, and `allows`,
// `canMintSignedUrl` and `readsIn` grant exactly what the rules grant and nothing more.
// Method: tables of inputs and of (scope, request) → decision, including the boundaries of
// prefixes, wildcard buckets, bucket-level operations and admin.
import t from 'tap';
import {
  SCOPES_CHARS_MAX,
  SCOPE_ENTRIES_MAX,
  allows,
  canMintSignedUrl,
  formatScopes,
  parseScopes,
  readsIn,
  type Scope,
  type ScopeRequest,
} from '../../src/security/scopes.js';

const badRequest = (message: RegExp) => ({ code: 'bad_request', status: 400, message });

t.test('verb lists parse in the given order without duplicates', async (t) => {
  t.same(parseScopes('read'), { kind: 'verbs', verbs: ['read'] });
  t.same(parseScopes('admin,read,write,read'), {
    kind: 'verbs',
    verbs: ['admin', 'read', 'write'],
  });
  t.same(parseScopes(' read , delete '), { kind: 'verbs', verbs: ['read', 'delete'] });
  t.equal(formatScopes(parseScopes('delete,read')), 'delete,read', 'comes back as sent');
});

t.test('resource entries parse, with optional and verbatim prefixes', async (t) => {
  t.same(parseScopes('op=read:bucket=photos:prefix=2024/'), {
    kind: 'resources',
    entries: [{ verb: 'read', bucket: 'photos', prefix: '2024/' }],
  });
  t.same(parseScopes('op=write:bucket=*'), {
    kind: 'resources',
    entries: [{ verb: 'write', bucket: '*', prefix: '' }],
  });
  t.same(
    parseScopes('op=write:bucket=bk1:prefix='),
    {
      kind: 'resources',
      entries: [{ verb: 'write', bucket: 'bk1', prefix: '' }],
    },
    'empty prefix means any key',
  );
  t.same(
    parseScopes('op=read:bucket=bk1:prefix=a:b c '),
    {
      kind: 'resources',
      entries: [{ verb: 'read', bucket: 'bk1', prefix: 'a:b c ' }],
    },
    'the prefix is the rest of the item, colons and spaces included',
  );
  t.same(
    parseScopes('op=read:bucket=bk1 , op=delete:bucket=bk0'),
    {
      kind: 'resources',
      entries: [
        { verb: 'read', bucket: 'bk1', prefix: '' },
        { verb: 'delete', bucket: 'bk0', prefix: '' },
      ],
    },
    'whitespace around prefix-less items is ignored; entries keep their order',
  );
  const repeated = 'op=admin:bucket=bkt:prefix=x,op=read:bucket=bkt:prefix=x';
  t.same(
    parseScopes(`${repeated},op=read:bucket=bkt:prefix=x`),
    {
      kind: 'resources',
      entries: [
        { verb: 'admin', bucket: 'bkt', prefix: 'x' },
        { verb: 'read', bucket: 'bkt', prefix: 'x' },
      ],
    },
    'duplicates dropped, the first kept where it was',
  );
});

t.test('formatScopes writes the canonical text', async (t) => {
  t.equal(formatScopes({ kind: 'verbs', verbs: ['admin', 'read', 'admin'] }), 'admin,read');
  const scope: Scope = {
    kind: 'resources',
    entries: [
      { verb: 'write', bucket: 'zeta', prefix: '' },
      { verb: 'read', bucket: '*', prefix: 'logs/' },
      { verb: 'read', bucket: 'alpha', prefix: 'a b' },
    ],
  };
  const text =
    'op=write:bucket=zeta:prefix=,op=read:bucket=*:prefix=logs/,op=read:bucket=alpha:prefix=a b';
  t.equal(formatScopes(scope), text, "the spec's full form, an empty prefix included");
  t.equal(formatScopes(parseScopes(text)), text);
  t.equal(
    formatScopes(parseScopes('op=write:bucket=zeta')),
    'op=write:bucket=zeta:prefix=',
    'a prefix left out is written empty',
  );
  t.throws(() => formatScopes({ kind: 'verbs', verbs: [] }), { code: 'ERR_ASSERTION' });
  t.throws(() => formatScopes({ kind: 'resources', entries: [] }), { code: 'ERR_ASSERTION' });
  const comma: Scope = {
    kind: 'resources',
    entries: [{ verb: 'read', bucket: 'bkt', prefix: 'a,b' }],
  };
  t.throws(() => formatScopes(comma), { code: 'ERR_ASSERTION' });
});

t.test('malformed scopes are refused with clear messages', async (t) => {
  const cases: [unknown, RegExp][] = [
    [undefined, /scopes must be a string/],
    [['read'], /scopes must be a string/],
    ['', /must not be empty/],
    ['   ', /must not be empty/],
    ['read,', /scope item 2 is empty/],
    [',read', /scope item 1 is empty/],
    ['read,,write', /scope item 2 is empty/],
    ['reed', /scope: unknown verb "reed"; expected read, write, delete or admin/],
    ['READ', /unknown verb "READ"/],
    ['read,list', /scope item 2: unknown verb "list"/],
    ['read write', /unknown verb "read write"/],
    ['read,op=read:bucket=bk1', /not a mix of both/],
    ['op=read:bucket=bk1,write', /not a mix of both/],
    ['op=read', /malformed: expected op=<verb>:bucket=<bucket>:prefix=<prefix>/],
    ['bucket=bk1:op=read', /malformed/],
    ['op=read:bucket=bk1:junk', /malformed/],
    ['op=read:bucket=bk1:Prefix=x', /malformed/],
    ['OP=read:bucket=bk1', /malformed/],
    ['read:bucket=bk1', /malformed/],
    ['op=read;bucket=bk1', /malformed/],
    ['op=list:bucket=bk1', /unknown verb "list" in op=/],
    ['op=:bucket=bk1', /unknown verb "" in op=/],
    ['op=read:bucket=', /bucket is missing; use bucket=\* for every bucket/],
    ['op=read:bucket=:prefix=x', /bucket is missing/],
    ['op=read:bucket=Photos', /scope: bucket name "Photos" may contain only lowercase/],
    ['op=read:bucket=ab', /3 to 63 characters/],
    ['read,op=read:bucket=xn--abc', /not a mix/],
    ['op=read:bucket=bk1,op=read:bucket=192.168.1.1', /scope item 2: bucket name .* IP address/],
    ['op=read:bucket=bk1: prefix=x', /malformed/],
    ['op=read:bucket=bk1 :prefix=x', /bucket name "bk1 " may contain only/],
    ['op=read:bucket=bk1:prefix=a\u0000', /key prefix must not contain U\+0000/],
    ['op=read:bucket=bk1:prefix=\uD800', /key prefix must be valid Unicode/],
    [`op=read:bucket=bk1:prefix=${'x'.repeat(1025)}`, /key prefix is 1025 bytes/],
    ['x'.repeat(SCOPES_CHARS_MAX + 1), /longer than 16384 characters/],
  ];
  for (const [text, message] of cases) {
    t.throws(() => parseScopes(text), badRequest(message), String(text).slice(0, 60));
  }
  const entry = (i: number): string => `op=read:bucket=b${i}a`;
  const many = Array.from({ length: SCOPE_ENTRIES_MAX + 1 }, (_, i) => entry(i)).join(',');
  t.throws(() => parseScopes(many), badRequest(/65 entries; the limit is 64/));
  const enough = Array.from({ length: SCOPE_ENTRIES_MAX }, (_, i) => entry(i)).join(',');
  t.equal(parseScopes(enough).kind, 'resources');
});

function decide(scopeText: string, request: ScopeRequest): boolean {
  return allows(parseScopes(scopeText), request);
}

t.test('verb lists grant their verbs everywhere; admin implies all', async (t) => {
  t.ok(decide('read', { verb: 'read', bucket: 'any', key: 'k' }));
  t.ok(decide('read', { verb: 'read' }), 'tenant-level, e.g. list buckets');
  t.ok(decide('read', { verb: 'read', bucket: 'any' }), 'bucket-level');
  t.notOk(decide('read', { verb: 'write', bucket: 'any', key: 'k' }));
  t.notOk(decide('read,write', { verb: 'delete', bucket: 'b', key: 'k' }));
  t.notOk(decide('read,write', { verb: 'admin', bucket: 'b' }));
  for (const verb of ['read', 'write', 'delete', 'admin'] as const) {
    t.ok(decide('admin', { verb, bucket: 'b', key: 'k' }), `admin implies ${verb}`);
  }
  const unknown = { verb: 'list' as 'read', bucket: 'b' };
  t.notOk(allows(parseScopes('admin'), unknown), 'unknown verbs never');
});

t.test('resource entries grant only their bucket and prefix', async (t) => {
  const scope = 'op=read:bucket=photos:prefix=2024/,op=write:bucket=*:prefix=uploads/';
  const table: [ScopeRequest, boolean, string][] = [
    [{ verb: 'read', bucket: 'photos', key: '2024/a.jpg' }, true, 'inside prefix'],
    [{ verb: 'read', bucket: 'photos', key: '2024/' }, true, 'the prefix itself'],
    [{ verb: 'read', bucket: 'photos', key: '2024' }, false, 'shorter than the prefix'],
    [{ verb: 'read', bucket: 'photos', key: '2023/a.jpg' }, false, 'outside prefix'],
    [{ verb: 'read', bucket: 'photos', key: '' }, false, 'empty key'],
    [{ verb: 'read', bucket: 'photos2', key: '2024/a.jpg' }, false, 'other bucket'],
    [{ verb: 'write', bucket: 'photos', key: '2024/a.jpg' }, false, 'other verb'],
    [{ verb: 'write', bucket: 'anything', key: 'uploads/x' }, true, 'wildcard bucket'],
    [{ verb: 'write', bucket: 'anything', key: 'upload/x' }, false, 'wildcard, wrong prefix'],
    [{ verb: 'read', bucket: 'photos' }, false, 'bucket-level op under a prefix'],
    [{ verb: 'read', bucket: 'photos', listPrefix: '2024/' }, true, 'list inside the prefix'],
    [{ verb: 'read', bucket: 'photos', listPrefix: '2024/06/' }, true, 'list deeper'],
    [{ verb: 'read', bucket: 'photos', listPrefix: '2024' }, false, 'list wider than the prefix'],
    [{ verb: 'read', bucket: 'photos', listPrefix: '' }, false, 'list everything'],
    [{ verb: 'read' }, false, 'tenant-level op'],
    [{ verb: 'read', key: '2024/a' }, false, 'a key without a bucket'],
    [{ verb: 'delete', bucket: 'photos', key: '2024/a' }, false, 'verb not granted'],
  ];
  for (const [request, expected, name] of table) t.equal(decide(scope, request), expected, name);
});

t.test('entries without a prefix, wildcard buckets and admin entries', async (t) => {
  t.ok(decide('op=write:bucket=bk1', { verb: 'write', bucket: 'bk1' }), 'bucket-level, no prefix');
  t.ok(decide('op=write:bucket=bk1', { verb: 'write', bucket: 'bk1', key: 'x' }));
  t.notOk(decide('op=write:bucket=bk1', { verb: 'write' }), 'one bucket is not tenant-level');
  t.ok(decide('op=read:bucket=*', { verb: 'read' }), 'every bucket and key is tenant-level');
  t.notOk(decide('op=read:bucket=*:prefix=a', { verb: 'read' }));
  const admin = 'op=admin:bucket=bk1:prefix=p/';
  t.ok(decide(admin, { verb: 'delete', bucket: 'bk1', key: 'p/x' }), 'admin entry implies delete');
  t.ok(decide(admin, { verb: 'admin', bucket: 'bk1', key: 'p/x' }));
  t.notOk(decide(admin, { verb: 'read', bucket: 'bk2', key: 'p/x' }), 'only on its resource');
  t.notOk(decide(admin, { verb: 'admin', bucket: 'bk1' }), 'not bucket-level under a prefix');
});

t.test('readsIn: the buckets a key may read anything in, for the bucket list', async (t) => {
  const reads = (text: string, bucket?: string): boolean => readsIn(parseScopes(text), bucket);
  t.ok(reads('read'), 'a read verb reads everywhere');
  t.ok(reads('admin', 'bk1'), 'admin implies read');
  t.notOk(reads('write,delete'), 'no read verb');
  t.notOk(reads('write,delete', 'bk1'));
  const scoped = 'op=read:bucket=bk1:prefix=in/,op=write:bucket=bk2';
  t.ok(reads(scoped), 'reads in some bucket');
  t.ok(reads(scoped, 'bk1'), 'under a prefix still counts');
  t.notOk(reads(scoped, 'bk2'), 'write alone does not');
  t.notOk(reads(scoped, 'bk3'));
  t.ok(reads('op=read:bucket=*:prefix=a/', 'bk9'), 'a wildcard bucket');
  t.ok(reads('op=admin:bucket=bk1', 'bk1'));
  t.notOk(reads('op=write:bucket=*'), 'writes everywhere, reads nowhere');
});

t.test("canMintSignedUrl needs the method's verb on the resource", async (t) => {
  const readOnly = parseScopes('read');
  const readWrite = parseScopes('read,write');
  t.ok(canMintSignedUrl(readOnly, 'GET'));
  t.notOk(canMintSignedUrl(readOnly, 'PUT'), 'a read-only key cannot mint PUT URLs');
  t.ok(canMintSignedUrl(readWrite, 'PUT'));
  t.ok(canMintSignedUrl(parseScopes('admin'), 'PUT'));
  t.notOk(canMintSignedUrl(readWrite, 'DELETE'));
  t.notOk(canMintSignedUrl(readWrite, 'get'), 'methods are case-sensitive');
  t.notOk(canMintSignedUrl(parseScopes('delete'), 'GET'));
  const entries = parseScopes('op=read:bucket=bk1:prefix=pub/,op=admin:bucket=bk2:prefix=in/');
  t.ok(canMintSignedUrl(entries, 'GET'));
  t.ok(canMintSignedUrl(entries, 'PUT'), 'through the admin entry');
  t.notOk(canMintSignedUrl(parseScopes('op=read:bucket=bk1'), 'PUT'));
  t.ok(canMintSignedUrl(entries, 'GET', { bucket: 'bk1', key: 'pub/a' }));
  t.notOk(canMintSignedUrl(entries, 'GET', { bucket: 'bk1', key: 'priv/a' }));
  t.notOk(canMintSignedUrl(entries, 'PUT', { bucket: 'bk1', key: 'pub/a' }));
  t.ok(canMintSignedUrl(entries, 'PUT', { bucket: 'bk2', keyPrefix: 'in/user-7/' }));
  t.notOk(canMintSignedUrl(entries, 'PUT', { bucket: 'bk2', keyPrefix: 'i' }), 'prefix wider');
  t.notOk(canMintSignedUrl(entries, 'PUT', { bucket: 'bk2', keyPrefix: '' }), 'any key');
  t.notOk(canMintSignedUrl(entries, 'PUT', { bucket: 'bk2' }), 'neither key nor keyPrefix');
  const both = { bucket: 'bk2', key: 'in/a', keyPrefix: 'in/' };
  t.notOk(canMintSignedUrl(entries, 'PUT', both), 'both key and keyPrefix');
  t.ok(canMintSignedUrl(readWrite, 'PUT', { bucket: 'any', keyPrefix: '' }));
  t.notOk(canMintSignedUrl(readWrite, 'POST', { bucket: 'any', key: 'k' }));
});
