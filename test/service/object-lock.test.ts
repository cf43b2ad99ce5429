// Goal: object lock's rules decide as AWS does: which versions may be deleted (legal hold and
// COMPLIANCE never, GOVERNANCE only bypassed, expired retention always), which retention changes
// are allowed, what a write's lock headers mean, and that only an admin-scoped key bypasses
// (recorded on the audit row). The lifecycle executor's `isDeletionBlocked` never bypasses.
// Method: the pure functions of service/object-lock.ts and engine/ops/object-lock.ts, with
// made-up versions and an explicit clock.
import t from 'tap';
import type { ObjectVersionRecord } from '../../src/engine/index/schema.js';
import {
  checkLockDefault,
  checkRetentionChange,
  deletionBlock,
} from '../../src/engine/ops/object-lock.js';
import {
  BYPASS_AUDIT_REASON,
  governanceBypass,
  isDeletionBlocked,
  newVersionLockOf,
  parseLockDate,
} from '../../src/service/object-lock.js';
import type { RequestContext } from '../../src/service/context.js';
import { parseScopes } from '../../src/security/scopes.js';
import { isLightwellError } from '../../src/util/errors.js';

const NOW = Date.UTC(2026, 11, 7);
const DAY = 86_400_000;

function version(extra: Partial<ObjectVersionRecord>): ObjectVersionRecord {
  return {
    key: 'k',
    versionId: '0000000000000001',
    seq: 1,
    lastModified: NOW,
    size: 1,
    etag: '"e"',
    contentType: 'text/plain',
    metadata: {},
    checksums: {},
    chunks: Buffer.alloc(0),
    storedBytes: 1,
    compressed: false,
    ...extra,
  };
}

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return isLightwellError(error) ? error.code : 'not lightwell';
  }
  return 'none';
}

t.test('which versions may be deleted', async (t) => {
  const governance = version({ retention: { mode: 'GOVERNANCE', retainUntil: NOW + DAY } });
  const compliance = version({ retention: { mode: 'COMPLIANCE', retainUntil: NOW + DAY } });
  const expired = version({ retention: { mode: 'COMPLIANCE', retainUntil: NOW - 1 } });
  const held = version({
    legalHold: 'ON',
    retention: { mode: 'GOVERNANCE', retainUntil: NOW - 1 },
  });
  t.equal(deletionBlock(governance, NOW), 'governance');
  t.equal(deletionBlock(governance, NOW, true), undefined, 'GOVERNANCE bypassed');
  t.equal(deletionBlock(compliance, NOW, true), 'compliance', 'COMPLIANCE never');
  t.equal(deletionBlock(held, NOW, true), 'legal-hold', 'a legal hold never');
  t.equal(deletionBlock(expired, NOW), undefined, 'an expired retention protects nothing');
  t.equal(deletionBlock(version({ legalHold: 'OFF' }), NOW), undefined);
  t.ok(isDeletionBlocked(governance, NOW), 'expiry never bypasses GOVERNANCE');
  t.ok(isDeletionBlocked(held, NOW));
  t.notOk(isDeletionBlocked(expired, NOW));
  t.notOk(isDeletionBlocked(governance, NOW + DAY), 'the retain-until instant itself frees it');
});

t.test('which retention changes are allowed', async (t) => {
  type Retention = { mode: 'GOVERNANCE' | 'COMPLIANCE'; retainUntil: number };
  const gov: Retention = { mode: 'GOVERNANCE', retainUntil: NOW + DAY };
  const comp: Retention = { mode: 'COMPLIANCE', retainUntil: NOW + DAY };
  const change = (
    current: Retention | undefined,
    next: Retention | undefined,
    bypass = false,
  ): string => codeOf(() => checkRetentionChange(current, next, NOW, bypass));
  t.equal(change(gov, { ...gov, retainUntil: NOW + 2 * DAY }), 'none', 'extend');
  t.equal(change(gov, gov), 'none', 'the same date');
  t.equal(change(gov, { ...gov, retainUntil: NOW + 1 }), 'forbidden', 'shorten');
  t.equal(change(gov, { ...gov, retainUntil: NOW + 1 }, true), 'none', 'shorten bypassed');
  t.equal(change(gov, { ...comp }), 'forbidden', 'to COMPLIANCE without bypass');
  t.equal(change(gov, { ...comp }, true), 'none', 'to COMPLIANCE bypassed');
  t.equal(change(gov, undefined), 'forbidden', 'remove');
  t.equal(change(gov, undefined, true), 'none', 'remove bypassed');
  t.equal(change(comp, { ...comp, retainUntil: NOW + 2 * DAY }, true), 'none', 'extend');
  t.equal(change(comp, { ...comp, retainUntil: NOW + 1 }, true), 'forbidden', 'shorten');
  t.equal(change(comp, gov, true), 'forbidden', 'to GOVERNANCE');
  t.equal(change(comp, undefined, true), 'forbidden', 'remove');
  t.equal(change({ ...comp, retainUntil: NOW - 1 }, undefined), 'none', 'expired');
  t.equal(change(undefined, gov), 'none', 'first retention');
});

t.test('a default retention and a write lock as the client sends them', async (t) => {
  t.same(checkLockDefault({ mode: 'GOVERNANCE', days: 3 }), { mode: 'GOVERNANCE', days: 3 });
  t.same(checkLockDefault({ mode: 'COMPLIANCE', years: 2 }), { mode: 'COMPLIANCE', years: 2 });
  for (const bad of [
    { mode: 'GOVERNANCE', days: 1, years: 1 },
    { mode: 'GOVERNANCE' },
    { mode: 'GOVERNANCE', days: 0 },
    { mode: 'GOVERNANCE', days: 1.5 },
    { mode: 'GOVERNANCE', years: 101 },
    { mode: 'other', days: 1 },
  ])
    t.equal(
      codeOf(() => checkLockDefault(bad)),
      'bad_request',
      JSON.stringify(bad),
    );

  t.equal(parseLockDate('2030-01-01T00:00:00Z'), Date.UTC(2030, 0, 1));
  t.equal(parseLockDate('2030-01-01T00:00:00.123456Z'), Date.UTC(2030, 0, 1) + 123);
  t.equal(parseLockDate('2030-01-01T02:00:00+02:00'), Date.UTC(2030, 0, 1));
  t.equal(parseLockDate('2030-01-01T02:00:00+0200'), Date.UTC(2030, 0, 1));
  for (const bad of ['2030-01-01', 'tomorrow', '2030-01-01T00:00:00', '2030-13-45T00:00:00Z'])
    t.equal(
      codeOf(() => parseLockDate(bad)),
      'bad_request',
      bad,
    );

  t.equal(newVersionLockOf({}, NOW), undefined);
  t.same(newVersionLockOf({ mode: 'GOVERNANCE', retainUntil: '2030-01-01T00:00:00Z' }, NOW), {
    mode: 'GOVERNANCE',
    retainUntil: Date.UTC(2030, 0, 1),
  });
  t.same(newVersionLockOf({ legalHold: 'ON' }, NOW), { legalHold: 'ON' });
  for (const bad of [
    { mode: 'GOVERNANCE' },
    { retainUntil: '2030-01-01T00:00:00Z' },
    { mode: 'NONE', retainUntil: '2030-01-01T00:00:00Z' },
    { mode: 'GOVERNANCE', retainUntil: '2020-01-01T00:00:00Z' },
    { legalHold: 'on' },
  ])
    t.equal(
      codeOf(() => newVersionLockOf(bad, NOW)),
      'bad_request',
      JSON.stringify(bad),
    );
});

t.test('only an admin-scoped key bypasses, and its audit row says so', async (t) => {
  const context = (scopes: string): RequestContext => ({
    principal: {
      accessKeyId: 'AK',
      tenant: { id: 'alice' } as never,
      scope: parseScopes(scopes),
    },
    requestId: 'r',
    remoteAddress: '127.0.0.1',
    audit: { action: 's3:DeleteObject' },
    path: '/b/k',
    clock: () => NOW,
  });
  const target = { bucket: 'b', key: 'k' };
  const admin = context('read,write,delete,admin');
  t.equal(governanceBypass(admin, target, true), true);
  t.equal(admin.audit.reason, BYPASS_AUDIT_REASON);
  const plain = context('read,write,delete');
  t.equal(governanceBypass(plain, target, true), false);
  t.equal(plain.audit.reason, undefined, 'nothing bypassed, nothing recorded');
  const notAsked = context('admin');
  t.equal(governanceBypass(notAsked, target, false), false);
  t.equal(notAsked.audit.reason, undefined);
  const elsewhere = context('op=admin:bucket=other');
  t.equal(governanceBypass(elsewhere, target, true), false, 'admin on another bucket only');
});
