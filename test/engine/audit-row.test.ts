// Goal: an audit row is bounded before it is sent and stored: each text field over its limit is
// cut to the limit, ending in an ellipsis; a tenantId that is not a tenant id is dropped (it
// would become part of an index key); the caller's row is never changed, and a row that is
// already bounded is answered as it is, without a copy.
// Method: rows at, just over and far over each limit, and good and bad tenant ids.
import t from 'tap';
import { boundedAuditRow, type AuditInput } from '../../src/engine/ops/audit.js';

const LIMITS = {
  requestId: 64,
  actor: 128,
  action: 64,
  resource: 2048,
  reason: 1024,
  remoteAddr: 64,
} as const;

function row(overrides: Partial<AuditInput> = {}): AuditInput {
  return {
    requestId: 'req-1',
    actor: 'LWAKIAEXAMPLE0000001',
    action: 'object.get',
    resource: 'logs/a.json',
    outcome: 'allowed',
    status: 200,
    remoteAddr: '127.0.0.1',
    tenantId: 'acme',
    reason: 'rotation',
    ...overrides,
  };
}

t.test('a bounded row is answered as it is', async (t) => {
  const input = row();
  t.equal(boundedAuditRow(input), input);
  const atLimits = row(
    Object.fromEntries(Object.entries(LIMITS).map(([field, max]) => [field, 'x'.repeat(max)])),
  );
  t.equal(boundedAuditRow(atLimits), atLimits, 'every field exactly at its limit');
});

t.test('each long field is cut to its limit, ending in an ellipsis', async (t) => {
  for (const [field, max] of Object.entries(LIMITS)) {
    for (const length of [max + 1, max * 10]) {
      const input = row({ [field]: 'y'.repeat(length) });
      const copy = { ...input };
      const bounded = boundedAuditRow(input);
      const value = (bounded as unknown as Record<string, string>)[field] ?? '';
      t.equal(value.length, max, `${field} of ${length}`);
      t.ok(value.endsWith('…'), `${field} marked as cut`);
      t.same(input, copy, `${field}: the caller's row is unchanged`);
      t.equal(bounded.action, field === 'action' ? value : input.action, 'other fields kept');
    }
  }
});

t.test('a tenantId that is not a tenant id is dropped, a good one kept', async (t) => {
  for (const bad of ['', 'ab', 'Acme', 'a'.repeat(64), 'acme/other', 'x'.repeat(5000)]) {
    const input = row({ tenantId: bad });
    const bounded = boundedAuditRow(input);
    t.notOk('tenantId' in bounded, JSON.stringify(bad.slice(0, 20)));
    t.equal(input.tenantId, bad, "the caller's row keeps it");
  }
  const bounded = boundedAuditRow(row({ tenantId: 'acme-2', resource: 'r'.repeat(3000) }));
  t.equal(bounded.tenantId, 'acme-2');
  t.equal(bounded.resource.length, 2048);
});
