// Goal: bucket event notifications behave as data-api.md §6 and spec/DECISIONS.md say: configs
// in the documented shape (sns/sqs/lambda 501, admin key needed, private targets refused
// unless allowed, host names resolved); the signing secret is returned once per new config id
// and never again; events for creates and removes (with prefix/suffix filters) are delivered
// signed, at least once, in commit order per bucket; a failing receiver blocks only its own
// queue and is retried with backoff; delivery state is visible to the admin key; and events
// pending when the service is killed (SIGKILL) are delivered after the restart.
// Method: two real services. The first keeps the default settings (private targets refused).
// The second allows private targets and retries after 100–400 ms so that a real local webhook
// receiver, which fails and recovers on command, can stand in for the customer's endpoint.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { Service, type DataClient, type ObjectAnswer, type Problem } from '../helpers/service.js';
import { WebhookReceiver, signatureValid, type Delivery } from '../helpers/webhook-receiver.js';

/** A bucket's notification configs as the API answers them; t.match checks the rest. */
interface Configs {
  configs: Array<{ id: string; hasSecret?: boolean; signingSecret?: string }>;
}

/** `GET /buckets/{b}/notifications/status`: the fields these tests read. */
interface DeliveryStatus {
  pending: number;
  failedAttempts: number;
  lastError?: string;
  targets: unknown;
}

const configs = (list: unknown[]): { json: { configs: unknown[] } } => ({
  json: { configs: list },
});

t.test('notification configs: validation and server-side request forgery', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const admin = service.adminToken();
  const client = await service.tenant('acme', undefined, admin);
  const writer = await service.tenant('acme', 'read,write,delete', admin);
  await client.request('POST', '/buckets', { json: { name: 'evts' } });
  t.same(
    (await client.request('GET', '/buckets/evts/notifications')).json,
    { configs: [] },
    'empty, not 404',
  );
  const put = (list: unknown[], as: DataClient = client): ReturnType<DataClient['request']> =>
    as.request('PUT', '/buckets/evts/notifications', configs(list));
  const hook = { id: 'h', url: 'http://93.184.216.34/hook', events: ['object-created'] };
  t.equal((await put([hook], writer)).status, 403, 'an admin-scoped key is needed');
  for (const type of ['sns', 'sqs', 'lambda']) {
    const response = await put([{ ...hook, type }]);
    t.equal(response.status, 501, type);
    t.equal((response.json as Problem).code, 'not_implemented');
  }
  for (const url of [
    'http://127.0.0.1:9/x',
    'http://10.1.2.3/',
    'http://169.254.169.254/latest/meta-data',
    'http://[::1]:9/',
    'http://localhost:9/',
    'http://[::ffff:192.168.0.1]/',
    'http://0x7f.1/',
  ]) {
    t.equal((await put([{ ...hook, url }])).status, 400, `refused: ${url}`);
  }
  for (const bad of [
    { ...hook, url: 'ftp://93.184.216.34/' },
    { ...hook, url: 'http://user:pw@93.184.216.34/' },
    { ...hook, events: ['object-touched'] },
    { ...hook, events: [] },
    { ...hook, events: ['object-created', 'object-created'] },
    { ...hook, id: 'bad id' },
    { ...hook, type: 'carrier-pigeon' },
  ]) {
    t.equal((await put([bad])).status, 400, JSON.stringify(bad));
  }
  t.equal((await put([hook, hook])).status, 400, 'duplicate ids');
  const stored = await put([hook]);
  t.equal(stored.status, 200, 'a public address is accepted');
  t.match((stored.json as Configs).configs[0], {
    id: 'h',
    type: 'webhook',
    hasSecret: true,
    signingSecret: /^whsec_/,
  });
  t.equal((await client.request('DELETE', '/buckets/evts/notifications')).status, 204);
  t.same((await client.request('GET', '/buckets/evts/notifications')).json, { configs: [] });
});

t.test('webhook delivery', async (t) => {
  const receiver = await WebhookReceiver.start();
  t.teardown(() => receiver.close());
  const service = await Service.start({
    env: {
      LIGHTWELL_NOTIFICATIONS_ALLOW_PRIVATE_TARGETS: 'true',
      LIGHTWELL_NOTIFICATIONS_RETRY_BACKOFF_MIN: '100ms',
      LIGHTWELL_NOTIFICATIONS_RETRY_BACKOFF_MAX: '400ms',
    },
  });
  t.teardown(() => service.close());
  const admin = service.adminToken();
  const client = await service.tenant('acme', undefined, admin);
  const reader = await service.tenant('acme', 'read', admin);
  for (const name of ['alpha', 'beta'])
    await client.request('POST', '/buckets', { json: { name } });
  const secrets = new Map<string, string>();
  const keysAt = (path: string): unknown[] => receiver.eventsAt(path).map((event) => event['key']);
  const status = async (bucket: string): Promise<DeliveryStatus> =>
    (await client.request('GET', `/buckets/${bucket}/notifications/status`)).json as DeliveryStatus;
  /** The receiver sees a request before the engine commits its outcome: poll the status. */
  const statusWhen = async (
    bucket: string,
    ready: (state: DeliveryStatus) => boolean,
  ): Promise<DeliveryStatus> => {
    const deadline = Date.now() + 10_000;
    let state = await status(bucket);
    while (!ready(state) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      state = await status(bucket);
    }
    return state;
  };
  const checkSigned = (path: string, configId: string): boolean =>
    receiver.attempts
      .filter((d: Delivery) => d.path === path)
      .every((d) => signatureValid(secrets.get(configId) ?? '', d));

  await t.test('configs: the secret is shown once per new id', async (t) => {
    let response = await client.request(
      'PUT',
      '/buckets/alpha/notifications',
      configs([
        { id: 'all', url: receiver.url('/alpha'), events: ['object-created', 'object-removed'] },
        {
          id: 'logs',
          url: receiver.url('/logs'),
          events: ['object-created'],
          prefix: 'logs/',
          suffix: '.txt',
        },
      ]),
    );
    t.equal(response.status, 200);
    for (const config of (response.json as Configs).configs) {
      t.match(config.signingSecret, /^whsec_[A-Za-z0-9_-]{43}$/);
      secrets.set(config.id, config.signingSecret ?? '');
    }
    const listed = ((await client.request('GET', '/buckets/alpha/notifications')).json as Configs)
      .configs;
    t.same(
      listed.map((config) => [config.id, config.hasSecret, 'signingSecret' in config]),
      [
        ['all', true, false],
        ['logs', true, false],
      ],
    );
    response = await client.request(
      'PUT',
      '/buckets/alpha/notifications',
      configs([
        ...listed,
        { id: 'extra', url: receiver.url('/extra'), events: ['object-removed'] },
      ]),
    );
    t.same(
      (response.json as Configs).configs.map((config) => 'signingSecret' in config),
      [false, false, true],
      'same ids keep their secret; a new id gets one',
    );
    response = await client.request('PUT', '/buckets/alpha/notifications', configs(listed));
    t.equal((response.json as Configs).configs.length, 2);
    t.equal((await reader.request('GET', '/buckets/alpha/notifications')).status, 403);
    const beta = await client.request(
      'PUT',
      '/buckets/beta/notifications',
      configs([{ id: 'b', url: receiver.url('/beta'), events: ['object-created'] }]),
    );
    t.equal((beta.json as Configs).configs[0]?.id, 'b');
  });

  await t.test('events: signed, filtered, in commit order', async (t) => {
    await client.put('alpha', 'a.bin', 'one');
    await client.put('alpha', 'logs/x.txt', 'two');
    await client.put('alpha', 'logs/y.bin', 'three');
    await client.request('POST', '/buckets/alpha/object-copy/copy.bin', {
      json: { sourceBucket: 'alpha', sourceKey: 'a.bin' },
    });
    await client.request('DELETE', '/buckets/alpha/objects/a.bin');
    const upload = (
      (await client.request('POST', '/buckets/alpha/multipart/multi.bin')).json as {
        uploadId: string;
      }
    ).uploadId;
    const part = await client.request(
      'PUT',
      `/buckets/alpha/multipart/${upload}/parts/1/multi.bin`,
      { body: randomBytes(1000) },
    );
    const etag = (part.json as ObjectAnswer).etag;
    await client.request('POST', `/buckets/alpha/multipart/${upload}/complete/multi.bin`, {
      json: { parts: [{ partNumber: 1, etag }] },
    });
    await receiver.waitFor(
      () => receiver.eventsAt('/alpha').length >= 6 && receiver.eventsAt('/logs').length >= 1,
    );
    t.same(
      keysAt('/alpha'),
      ['a.bin', 'logs/x.txt', 'logs/y.bin', 'copy.bin', 'a.bin', 'multi.bin'],
      'commit order',
    );
    t.same(
      receiver.eventsAt('/alpha').map((event) => event['type']),
      [
        'object-created',
        'object-created',
        'object-created',
        'object-created',
        'object-removed',
        'object-created',
      ],
    );
    t.same(keysAt('/logs'), ['logs/x.txt'], 'prefix and suffix filters');
    const first = receiver.eventsAt('/alpha')[0] ?? {};
    t.match(first, {
      id: /^[0-9a-f]{16}$/,
      type: 'object-created',
      tenantId: 'acme',
      bucket: 'alpha',
      key: 'a.bin',
      size: 3,
      etag: /^"[0-9a-f]{32}"$/,
    });
    t.ok(Math.abs(Date.parse(String(first['time'])) - Date.now()) < 60_000);
    t.match(receiver.eventsAt('/alpha')[5], { key: 'multi.bin', etag: /-1"$/ });
    t.ok(
      checkSigned('/alpha', 'all') && checkSigned('/logs', 'logs'),
      'every delivery carries a valid X-Service-Signature',
    );
    t.notOk(
      receiver.attempts
        .filter((d) => d.path === '/logs')
        .some((d) => signatureValid(secrets.get('all') ?? '', d)),
      'secrets differ per config',
    );
    t.equal(keysAt('/extra').length, 0, 'the removed config got nothing');
    t.match(await statusWhen('alpha', (state) => state['pending'] === 0), {
      pending: 0,
      delivered: 7,
      failedAttempts: 0,
    });
  });

  await t.test(
    'a failing receiver blocks only its own queue, then recovers in order',
    async (t) => {
      receiver.fail({ kind: 'status', status: 503 }, '/alpha');
      for (const key of ['k1', 'k2', 'k3']) await client.put('alpha', key, key);
      await client.put('beta', 'b1', 'x');
      await receiver.waitFor(() => keysAt('/beta').includes('b1'));
      t.pass('another bucket is not blocked');
      await receiver.waitFor(
        () =>
          receiver.attempts.filter((d) => d.path === '/alpha' && d.event['key'] === 'k1').length >=
          3,
      );
      t.notOk(
        receiver.attempts.some((d) => d.path === '/alpha' && d.event['key'] === 'k2'),
        'later events wait behind the failing one',
      );
      const failing = await statusWhen('alpha', (state) => state['failedAttempts'] >= 2);
      t.match(failing, { pending: 3, lastError: 'HTTP 503' });
      t.ok(failing['failedAttempts'] >= 2, 'failed attempts are counted');
      t.match(failing['targets'], [{ configId: 'all', attempts: Number, lastError: 'HTTP 503' }]);
      t.equal(
        (await reader.request('GET', '/buckets/alpha/notifications/status')).status,
        403,
        'state is for admin keys',
      );
      const gaps = receiver.attempts
        .filter((d) => d.path === '/alpha' && d.event['key'] === 'k1')
        .map((d) => d.receivedAt);
      t.ok(gaps.length >= 3 && gaps[2]! - gaps[1]! >= 100, 'retries back off');

      receiver.fail({ kind: 'status', status: 500 }, '/logs');
      await client.put('alpha', 'logs/z.txt', 'z');
      receiver.recover('/alpha');
      await receiver.waitFor(() => keysAt('/alpha').includes('logs/z.txt'));
      t.same(
        keysAt('/alpha').slice(-4),
        ['k1', 'k2', 'k3', 'logs/z.txt'],
        'delivered in commit order after recovery',
      );
      const current = (
        (await client.request('GET', '/buckets/alpha/notifications')).json as Configs
      ).configs.filter((config) => config.id !== 'logs');
      await client.request('PUT', '/buckets/alpha/notifications', configs(current));
      receiver.recover('/logs');
      t.match(
        await statusWhen('alpha', (state) => state['pending'] === 0),
        { pending: 0, discarded: 1 },
        'the event of the removed config is discarded',
      );
      t.notOk(keysAt('/logs').includes('logs/z.txt'));
    },
  );

  await t.test('events pending at a SIGKILL are delivered after the restart', async (t) => {
    receiver.fail({ kind: 'drop' }, '/alpha');
    for (const key of ['c1', 'c2', 'c3']) await client.put('alpha', key, key);
    await receiver.waitFor(() =>
      receiver.attempts.some((d) => d.path === '/alpha' && d.event['key'] === 'c1'),
    );
    const dropped = await statusWhen('alpha', (state) =>
      /ECONNRESET|socket hang up|EPIPE/.test(String(state['lastError'])),
    );
    t.match(
      dropped['lastError'],
      /ECONNRESET|socket hang up|EPIPE/,
      'a dropped connection is a failure',
    );
    await client.put('alpha', 'c4', 'committed just before the kill');
    await service.kill9();
    receiver.recover();
    await service.launch();
    await receiver.waitFor(() => keysAt('/alpha').includes('c4'), 30_000);
    t.same(
      keysAt('/alpha').slice(-4),
      ['c1', 'c2', 'c3', 'c4'],
      'every pending event, once per id, in commit order',
    );
    const after = await statusWhen('alpha', (state) => state['pending'] === 0);
    t.equal(after['pending'], 0);
    t.ok(checkSigned('/alpha', 'all'), 'signed with the same secret after the restart');
    await client.put('alpha', 'c5', 'after the restart');
    await receiver.waitFor(() => keysAt('/alpha').includes('c5'));
    t.pass('delivery goes on');
  });
});
