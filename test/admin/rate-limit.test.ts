// Goal: `admin.rate_limit` limits each admin token on its own: past the burst a token gets 429
// `rate_limited` with Retry-After, another token's requests are unaffected, the limited token
// works again after Retry-After, and the refusals are audited as denied.
// Method: the real service with a small limit (2/s burst 4); bursts of requests from two
// tokens.
import t from 'tap';
import { Service, type Problem } from '../helpers/service.js';
import { call, mintToken, auditRowOf } from './admin-testing.js';

t.test('per-token admin rate limit', async (t) => {
  const service = await Service.start({ args: ['--admin.rate_limit', '2/s burst 4'] });
  t.teardown(() => service.close());
  const [busy, calm] = await Promise.all([
    mintToken(service, 'viewer'),
    mintToken(service, 'owner'),
  ]);
  const statuses: number[] = [];
  let limited: Awaited<ReturnType<typeof call>> | undefined;
  for (let index = 0; index < 8; index += 1) {
    const answer = await call(service, 'GET', '/tenants', { token: busy.token });
    statuses.push(answer.status);
    if (answer.status === 429) limited ??= answer;
  }
  t.same(statuses.slice(0, 4), [200, 200, 200, 200], 'the burst passes');
  t.ok(statuses.slice(4).includes(429), 'then 429');
  t.equal((limited?.json as Problem | undefined)?.code, 'rate_limited');
  const retryAfter = Number(limited?.headers.get('retry-after'));
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After: ${retryAfter}`);
  t.equal(limited?.headers.get('content-type'), 'application/problem+json');

  for (let index = 0; index < 4; index += 1) {
    t.equal(
      (await call(service, 'GET', '/tenants', { token: calm.token })).status,
      200,
      "another token's requests are unaffected",
    );
  }
  const row = await auditRowOf(service, calm.token, limited?.headers.get('x-request-id') ?? '');
  t.match(row, { outcome: 'denied', status: 429, actor: `admin:${busy.tokenId}` });

  await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000 + 100));
  t.equal(
    (await call(service, 'GET', '/tenants', { token: busy.token })).status,
    200,
    'works again after Retry-After',
  );
});
