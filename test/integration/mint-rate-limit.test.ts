// Goal: `security.token_mint_rate` (10/s, burst 20 per access key by default) holds per key for
// the whole service, however many gateways share the public port. Each gateway kept its own
// buckets, so with `--gateways 2` a key got twice the burst, wrong secrets included.
// Method: serve with two gateways; 40 token requests at once, each on a new connection (so the
// kernel spreads them over both listeners), with the right secret and then with a wrong one.
// At most the burst plus what refills meanwhile may pass the limit; the rest are 429 with
// Retry-After.
import t from 'tap';
import { request } from 'node:http';
import { Service } from '../helpers/service.js';

const BURST = 20;
const PER_SECOND = 10;
const ATTEMPTS = 40;

/** POST /auth/token on a connection of its own; resolves with the status and Retry-After. */
function mint(
  port: number,
  accessKeyId: string,
  secretKey: string,
  localAddress = '127.0.0.1',
): Promise<{ status: number; retryAfter: string | undefined }> {
  const basic = Buffer.from(`${accessKeyId}:${secretKey}`).toString('base64');
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/api/v1/auth/token',
        agent: false,
        localAddress,
        headers: { Authorization: `Basic ${basic}` },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          const retryAfter = res.headers['retry-after'];
          resolve({ status: res.statusCode ?? 0, retryAfter });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

t.test('the token-mint limit is one per access key across two gateways', async (t) => {
  const service = await Service.start({ gateways: 2 });
  t.teardown(() => service.close());
  const port = Number(new URL(service.publicUrl).port);
  for (const [name, secretOf] of [
    ['the right secret', (secret: string) => secret],
    ['a wrong secret', () => 'not-the-secret'],
  ] as const) {
    // A key of its own per round: the tenant helper mints one token with it first.
    const client = await service.tenant(`mint-${name === 'the right secret' ? 'ok' : 'bad'}`);
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: ATTEMPTS }, () =>
        mint(port, client.accessKeyId, secretOf(client.secretKey)),
      ),
    );
    const seconds = (Date.now() - started) / 1000;
    const limited = answers.filter((answer) => answer.status === 429);
    const passed = answers.length - limited.length;
    const allowed = BURST + Math.ceil(PER_SECOND * seconds);
    t.ok(passed <= allowed, `${name}: ${passed} passed the limit in ${seconds} s (≤ ${allowed})`);
    t.ok(limited.length > 0, `${name}: the rest are 429`);
    t.ok(
      limited.every((answer) => Number(answer.retryAfter) >= 1),
      `${name}: each 429 says when to retry`,
    );
  }
});

t.test("wrong secrets from one address never lock the key's owner out", async (t) => {
  // Anyone who knows a key id could otherwise spend its bucket and make its owner's correct
  // mints answer 429.
  const service = await Service.start();
  t.teardown(() => service.close());
  const port = Number(new URL(service.publicUrl).port);
  const client = await service.tenant('mint-owner');
  const attacks = await Promise.all(
    Array.from({ length: ATTEMPTS }, () =>
      mint(port, client.accessKeyId, 'not-the-secret', '127.0.0.2'),
    ),
  );
  t.ok(
    attacks.some((answer) => answer.status === 429),
    'the attacker from 127.0.0.2 is rate limited',
  );
  const owner = await mint(port, client.accessKeyId, client.secretKey, '127.0.0.1');
  t.equal(owner.status, 200, "the owner's correct mint from 127.0.0.1 succeeds");
});
