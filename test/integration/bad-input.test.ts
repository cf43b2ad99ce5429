// Goal: nothing a client sends can corrupt data, leak resources or crash a process.
// Truncated bodies and clients that disconnect mid-upload commit nothing and give back their
// memory (300 aborted 2 MiB uploads against a 16 MiB body arena, then normal uploads work); a
// body longer or shorter than its Content-Length never commits other bytes than the declared
// ones; malformed JSON, unknown routes, wrong methods, oversized keys, metadata and headers,
// and missing, invalid or expired bearer tokens get the right status; every problem response
// is `application/problem+json` with `code`, `message`, `status` and `requestId` matching its
// `X-Request-Id`; HEAD and 204 answers leave the connection usable; a chunk damaged on disk
// makes a read fail visibly, never return wrong bytes; after the whole barrage the service is
// healthy and no process was restarted.
// Method: `lightwell serve` on loopback with `--limits.inflight_bytes_max 16MiB` (so a leak of
// a few blocks shows at once) and a 6 s token lifetime; fetch for well-formed requests, raw
// `node:net` sockets for malformed HTTP and for disconnects at chosen byte counts.
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Service, type DataClient, type ObjectsPage } from '../helpers/service.js';
import { HttpClient, chunkEntriesOf } from '../crash/crash-kit.js';
import { untilTestDeadline } from '../helpers/deadline.js';
import { segmentFileName } from '../../src/format/segment-header.js';

const MiB = 1024 * 1024;
const BUCKET = 'inputs';

interface RawResult {
  /** Every response received, in order (status code and head), and the body bytes after the last head. */
  readonly statuses: number[];
  readonly text: string;
  /** The server closed (or reset) the connection. */
  readonly closed: boolean;
}

/**
 * Writes `parts` to a new connection (with `pauseMs` between them), then either half-closes,
 * destroys, or keeps the socket open, and collects what comes back for `waitMs`.
 */
function raw(
  port: number,
  parts: ReadonlyArray<string | Buffer>,
  options: { then?: 'end' | 'destroy' | 'keep'; waitMs?: number; pauseMs?: number } = {},
): Promise<RawResult> {
  return new Promise((resolve) => {
    const socket: Socket = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    let closed = false;
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      const text = Buffer.concat(received).toString('latin1');
      const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => Number(match[1]));
      resolve({ statuses, text, closed });
    };
    socket.on('data', (data: Buffer) => received.push(data));
    socket.on('error', () => {
      closed = true;
    });
    socket.on('close', () => {
      closed = true;
      if (options.then !== 'destroy') finish();
    });
    const writeParts = async (): Promise<void> => {
      for (const part of parts) {
        if (socket.destroyed) break;
        socket.write(part);
        if (options.pauseMs) await new Promise((r) => setTimeout(r, options.pauseMs));
      }
      if (options.then === 'destroy') {
        socket.destroy();
        setTimeout(finish, options.waitMs ?? 0);
        return;
      }
      if (options.then === 'end') socket.end();
      setTimeout(finish, options.waitMs ?? 1000);
    };
    socket.on('connect', () => void writeParts());
  });
}

function head(method: string, path: string, headers: Record<string, string | number>): string {
  return `${method} /api/v1${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n`;
}

/** Checks the problem object of a response. */
function expectProblem(
  t: Asserts,
  response: { status: number; headers: Headers; json: unknown },
  status: number,
  code?: string,
): void {
  t.equal(response.status, status, `status ${status}${code ? ` (${code})` : ''}`);
  t.equal(response.headers.get('content-type'), 'application/problem+json', 'a problem+json body');
  const requestId = response.headers.get('x-request-id');
  t.ok(requestId, 'an X-Request-Id');
  t.match(
    response.json,
    { status, code: code ?? String, message: String, requestId },
    'code, message, status and the request id',
  );
}

interface Asserts {
  equal(found: unknown, wanted: unknown, message: string): boolean;
  ok(value: unknown, message: string): boolean;
  match(found: unknown, pattern: unknown, message: string): boolean;
}

t.test('bad input', async (t) => {
  const service = await Service.start({
    // Tokens live 6 s (4 to 6 s from the mint, as expiry counts whole seconds): long enough for
    // the steps between two logins on a loaded machine, short enough to wait out below.
    args: ['--limits.inflight_bytes_max', '16MiB', '--security.native_api_token_ttl', '6s'],
  });
  t.teardown(() => service.close());
  const port = Number(new URL(service.publicUrl).port);
  const client: DataClient = await service.tenant('inputs');
  t.equal((await client.request('POST', '/buckets', { json: { name: BUCKET } })).status, 201);
  const pidsAtStart = service.pids();
  const auth = (): Record<string, string> => ({ Authorization: `Bearer ${client.token}` });
  const fresh = async (): Promise<void> => {
    await client.login();
  };

  await t.test('disconnects and truncated bodies commit nothing and leak nothing', async (t) => {
    await fresh();
    const cases: Array<{ name: string; length: number; send: number; then: 'end' | 'destroy' }> = [
      { name: 'headers only, then gone', length: 2 * MiB, send: 0, then: 'destroy' },
      { name: 'half a block, then gone', length: 2 * MiB, send: MiB / 2, then: 'destroy' },
      { name: 'exactly one block, then gone', length: 2 * MiB, send: MiB, then: 'destroy' },
      { name: 'all but one byte, then gone', length: 2 * MiB, send: 2 * MiB - 1, then: 'destroy' },
      { name: 'a small body cut short, half-closed', length: 100, send: 50, then: 'end' },
      { name: 'a large body cut short, half-closed', length: 5 * MiB, send: 3 * MiB, then: 'end' },
    ];
    for (const entry of cases) {
      const key = `cut/${entry.name.replaceAll(/\W+/g, '-')}`;
      const result = await raw(
        port,
        [
          head('PUT', `/buckets/${BUCKET}/objects/${key}`, {
            ...auth(),
            'Content-Length': entry.length,
          }),
          randomBytes(entry.send),
        ],
        { then: entry.then, waitMs: 300 },
      );
      t.notOk(result.statuses.includes(200), `${entry.name}: no success answer`);
      const after = await client.get(BUCKET, key);
      t.equal(after.status, 404, `${entry.name}: nothing committed`);
    }

    // 300 aborted 2 MiB uploads, ten at a time, against a 16-block arena.
    const started = Date.now();
    for (let batch = 0; batch < 30; batch += 1) {
      await Promise.all(
        Array.from({ length: 10 }, (_, index) =>
          raw(
            port,
            [
              head('PUT', `/buckets/${BUCKET}/objects/aborted/${batch}-${index}`, {
                ...auth(),
                'Content-Length': 2 * MiB,
              }),
              randomBytes(MiB + (((batch * 10 + index) * 7919) % MiB)),
            ],
            { then: 'destroy', waitMs: 0 },
          ),
        ),
      );
    }
    t.comment(`300 aborted uploads in ${Date.now() - started} ms`);
    await fresh();
    const listed = await client.request('GET', `/buckets/${BUCKET}/objects?prefix=aborted/`);
    t.same((listed.json as ObjectsPage).objects, [], 'none of the 300 was committed');
    const body = randomBytes(5 * MiB + 3);
    // A leaked arena block shows as an upload that waits forever for memory: it is given until
    // the test's own limit, and then named as the wait that did not end.
    const put = await fetch(`${service.publicUrl}/buckets/${BUCKET}/objects/after/one`, {
      method: 'PUT',
      headers: auth(),
      body,
      signal: untilTestDeadline(),
    }).then(
      (response) => response.status,
      (error: unknown) =>
        `no answer by the test's time limit (${(error as Error).name}): the arena leaked`,
    );
    t.equal(put, 200, 'a normal 5 MiB upload still works');
    t.ok((await client.get(BUCKET, 'after/one')).bytes.equals(body), 'and reads back');
    // Eight concurrent 3 MiB uploads reserve more than the 16-block arena: they queue for it,
    // and all of them go through only if nothing was left held.
    await fresh(); // tokens live 6 s in this test
    const bodies = Array.from({ length: 8 }, () => randomBytes(3 * MiB));
    const puts = await Promise.all(
      bodies.map((bytes, index) =>
        fetch(`${service.publicUrl}/buckets/${BUCKET}/objects/after/many-${index}`, {
          method: 'PUT',
          headers: auth(),
          body: bytes,
          signal: untilTestDeadline(),
        }).then(
          (response) => response.status,
          () => "no answer by the test's time limit: an arena block stayed held",
        ),
      ),
    );
    t.same(puts, Array(8).fill(200), 'eight concurrent uploads go through the 16 MiB arena');
    for (let index = 0; index < 8; index += 1) {
      await fresh();
      const got = await client.get(BUCKET, `after/many-${index}`);
      if (!got.bytes.equals(bodies[index] as Buffer))
        t.fail(
          `after/many-${index} reads back wrong: ${got.status}, ${got.bytes.length} bytes ${got.bytes.subarray(0, 200).toString()}`,
        );
    }

    // Downloads abandoned half way.
    await fresh();
    await Promise.all(
      Array.from({ length: 40 }, () =>
        raw(port, [head('GET', `/buckets/${BUCKET}/objects/after/one`, auth())], {
          then: 'destroy',
          waitMs: 0,
          pauseMs: 5,
        }),
      ),
    );
    await fresh();
    const again = await client.get(BUCKET, 'after/one');
    t.ok(
      again.bytes.equals(body),
      `abandoned downloads leave the object readable (${again.status}, ${again.bytes.length} bytes ${again.status === 200 ? '' : again.bytes.toString()})`,
    );
  });

  await t.test('an idempotent replay is answered only once its whole body is in', async (t) => {
    await fresh();
    const body = randomBytes(2 * MiB + 5);
    const headers = {
      ...auth(),
      'Idempotency-Key': 'replay-cut',
      'X-Service-Checksum-SHA256': createHash('sha256').update(body).digest('base64'),
    };
    const first = await client.put(BUCKET, 'replayed', body, headers);
    t.equal(first.status, 200);
    // The socket stays open (or half-closed) with the body incomplete: no answer may come.
    const cuts: Array<{ send: number; then: 'end' | 'keep' }> = [
      { send: 0, then: 'keep' },
      { send: MiB, then: 'keep' },
      { send: 2 * MiB, then: 'end' },
    ];
    for (const cut of cuts) {
      const result = await raw(
        port,
        [
          head('PUT', `/buckets/${BUCKET}/objects/replayed`, {
            ...headers,
            'Content-Length': body.length,
          }),
          body.subarray(0, cut.send),
        ],
        { then: cut.then, waitMs: 500 },
      );
      t.same(result.statuses, [], `${cut.send} bytes, then ${cut.then}: no answer, no replay`);
    }
    const replay = await client.put(BUCKET, 'replayed', body, headers);
    t.same([replay.status, replay.json], [200, first.json], 'a whole replay still replays');
    t.ok((await client.get(BUCKET, 'replayed')).bytes.equals(body));
  });

  await t.test('a body longer or shorter than its Content-Length', async (t) => {
    await fresh();
    // Longer: HTTP/1.1 frames the body by Content-Length; what follows is a new (malformed) request.
    const longer = await raw(
      port,
      [
        head('PUT', `/buckets/${BUCKET}/objects/len/longer`, { ...auth(), 'Content-Length': 10 }) +
          '0123456789' +
          'EXTRA BYTES THAT ARE NOT HTTP\r\n\r\n',
      ],
      { waitMs: 1500 },
    );
    t.comment(
      `longer body: answers ${JSON.stringify(longer.statuses)}, connection ${longer.closed ? 'closed' : 'open'}`,
    );
    t.ok(longer.closed, 'the connection is closed after the bytes past the declared length');
    const stored = await client.get(BUCKET, 'len/longer');
    if (stored.status === 200)
      t.equal(
        stored.bytes.toString(),
        '0123456789',
        'if anything was committed, it is exactly the declared body',
      );
    else t.equal(stored.status, 404, 'nothing committed');
    const listed = await client.request('GET', `/buckets/${BUCKET}/objects?prefix=len/`);
    t.ok(
      (listed.json as ObjectsPage).objects.length <= 1,
      'the extra bytes did not become another object',
    );

    // Longer, in a separate packet after the declared body.
    const later = await raw(
      port,
      [
        head('PUT', `/buckets/${BUCKET}/objects/len/later`, { ...auth(), 'Content-Length': 10 }) +
          '0123456789',
        'MORE BODY BYTES',
      ],
      { waitMs: 1500, pauseMs: 300 },
    );
    t.comment(
      `longer body, extra bytes 300 ms later: answers ${JSON.stringify(later.statuses)}, connection ${later.closed ? 'closed' : 'open'}`,
    );
    const laterStored = await client.get(BUCKET, 'len/later');
    t.ok(
      laterStored.status === 404 || laterStored.bytes.toString() === '0123456789',
      'never other bytes than the declared ones',
    );

    // Shorter, then the client half-closes.
    const shorter = await raw(
      port,
      [
        head('PUT', `/buckets/${BUCKET}/objects/len/shorter`, {
          ...auth(),
          'Content-Length': 1000,
        }),
        'only these bytes',
      ],
      { then: 'end', waitMs: 1000 },
    );
    t.notOk(shorter.statuses.includes(200), 'a short body is not accepted');
    t.equal((await client.get(BUCKET, 'len/shorter')).status, 404, 'a short body commits nothing');

    const chunked = await raw(
      port,
      [
        head('PUT', `/buckets/${BUCKET}/objects/len/chunked`, {
          ...auth(),
          'Transfer-Encoding': 'chunked',
        }) + '5\r\nhello\r\n0\r\n\r\n',
      ],
      { waitMs: 800 },
    );
    t.comment(`chunked PUT: answers ${JSON.stringify(chunked.statuses)}`);
    t.ok(
      chunked.statuses[0] === 411 || chunked.closed,
      'a PUT without Content-Length is refused (411)',
    );
    const both = await raw(
      port,
      [
        head('PUT', `/buckets/${BUCKET}/objects/len/both`, {
          ...auth(),
          'Content-Length': 5,
          'Transfer-Encoding': 'chunked',
        }) + '5\r\nhello\r\n0\r\n\r\n',
      ],
      { waitMs: 800 },
    );
    t.comment(
      `Content-Length with chunked: answers ${JSON.stringify(both.statuses)}, connection ${both.closed ? 'closed' : 'open'}`,
    );
    t.notOk(both.statuses.includes(200), 'Content-Length together with chunked is not accepted');
    const badLength = await raw(
      port,
      [
        head('PUT', `/buckets/${BUCKET}/objects/len/bad`, {
          ...auth(),
          'Content-Length': '12abc',
        }) + 'hello',
      ],
      { waitMs: 800 },
    );
    t.comment(
      `malformed Content-Length: answers ${JSON.stringify(badLength.statuses)}, connection ${badLength.closed ? 'closed' : 'open'}`,
    );
    t.notOk(badLength.statuses.includes(200), 'a malformed Content-Length is not accepted');
    for (const key of ['len/chunked', 'len/both', 'len/bad'])
      t.equal((await client.get(BUCKET, key)).status, 404, `${key}: nothing committed`);
  });

  await t.test('problem objects for malformed requests', async (t) => {
    await fresh();
    const base = service.publicUrl;
    const json = async (
      response: Response,
    ): Promise<{ status: number; headers: Headers; json: unknown }> => {
      const text = await response.text();
      return {
        status: response.status,
        headers: response.headers,
        json: text ? JSON.parse(text) : undefined,
      };
    };
    const post = (body: string, headers: Record<string, string> = {}): Promise<Response> =>
      fetch(`${base}/buckets`, {
        method: 'POST',
        headers: { ...auth(), 'Content-Type': 'application/json', ...headers },
        body,
      });
    expectProblem(t, await json(await post('{"name": ')), 400, 'bad_request');
    expectProblem(t, await json(await post('[1, 2, 3]')), 400, 'bad_request');
    expectProblem(t, await json(await post('"just a string"')), 400, 'bad_request');
    expectProblem(t, await json(await post('')), 400, 'bad_request');
    // A field given twice is refused, not read as its last value, and nothing is created.
    const twice = await json(await post('{"name": "dupe-a", "name": "dupe-b"}'));
    expectProblem(t, twice, 400, 'bad_request');
    t.match((twice.json as { detail: string }).detail, /"name" more than once/);
    const listed = await (await fetch(`${base}/buckets`, { headers: auth() })).text();
    t.notMatch(listed, /dupe-/, 'no bucket was created by the refused request');
    // Nesting is bounded: a body of 5,000 nested arrays is a 400 before anything decodes it.
    const deep = await json(await post(`{"name": ${'['.repeat(5000)}${']'.repeat(5000)}}`));
    expectProblem(t, deep, 400, 'bad_request');
    t.match((deep.json as { detail: string }).detail, /deeper than 32 levels/);
    // A bucket is created versioned or not; "Suspended" and "Unversioned" are states, not
    // choices at creation (DECISIONS.md: `versioning?: "Enabled"`).
    for (const versioning of ['Suspended', 'Unversioned', 'enabled', true]) {
      expectProblem(
        t,
        await json(await post(JSON.stringify({ name: 'vbucket', versioning }))),
        400,
        'bad_request',
      );
    }
    expectProblem(
      t,
      await json(await post(`{"name": "${'x'.repeat(2 * MiB)}"}`)),
      413,
      'payload_too_large',
    );
    expectProblem(
      t,
      await json(await fetch(`${base}/no/such/route`, { headers: auth() })),
      404,
      'not_found',
    );
    // Outside /api/v1 every path is S3 (DECISIONS.md): `/api/…` names the reserved bucket `api`.
    const elsewhere = await fetch(`${base.replace('/api/v1', '/api/v2')}/elsewhere`);
    t.equal(elsewhere.status, 404, '/api/v2/… is an S3 path');
    t.match(await elsewhere.text(), /<Code>NoSuchBucket<\/Code>/);
    expectProblem(
      t,
      await json(await fetch(`${base}/buckets`, { method: 'PATCH', headers: auth() })),
      405,
      'method_not_allowed',
    );
    expectProblem(
      t,
      await json(await fetch(`${base}/buckets`, { method: 'PUT', headers: auth() })),
      405,
      'method_not_allowed',
    );
    expectProblem(
      t,
      await json(await fetch(`${base}/buckets/${BUCKET}/objects/%E0%A4%A`, { headers: auth() })),
      400,
      'bad_request',
    );

    const key1024 = 'k'.repeat(1024);
    t.equal(
      (await client.put(BUCKET, key1024, 'fits')).status,
      200,
      'a key of exactly 1024 bytes is fine',
    );
    expectProblem(t, await client.put(BUCKET, 'k'.repeat(1025), 'too long'), 400, 'bad_request');
    expectProblem(
      t,
      await client.put(BUCKET, '€'.repeat(342), 'too long in UTF-8'),
      400,
      'bad_request',
    );
    expectProblem(t, await client.get(BUCKET, 'k'.repeat(2000)), 400, 'bad_request');
    // A request head (URL and headers) over the gateway's limit (16 KiB, HEADER_BYTES_MAX) is
    // refused with a problem object. Below it, an over-long key is a 400.
    expectProblem(t, await client.get(BUCKET, 'k'.repeat(5000)), 400, 'bad_request');
    expectProblem(t, await client.get(BUCKET, 'k'.repeat(20_000)), 431, 'bad_request');
    expectProblem(
      t,
      await client.get(BUCKET, 'k', { 'X-Filler': 'f'.repeat(20_000) }),
      431,
      'bad_request',
    );
    // Valid by the API's limits (a 1023-byte key, 1.9 KiB of metadata), yet over uWS's 4 KiB.
    const valid = await client.put(BUCKET, '€'.repeat(341), 'x', {
      'X-Service-Meta-A': 'v'.repeat(1900),
    });
    t.equal(valid.status, 200, 'a request within every API limit is accepted');
    expectProblem(
      t,
      await client.put(BUCKET, 'meta/big', 'x', { 'X-Service-Meta-Big': 'v'.repeat(2100) }),
      400,
      'bad_request',
    );
    const manyMeta: Record<string, string> = {};
    for (let index = 0; index < 40; index += 1)
      manyMeta[`X-Service-Meta-Field-${index}`] = 'v'.repeat(60);
    expectProblem(t, await client.put(BUCKET, 'meta/many', 'x', manyMeta), 400, 'bad_request');
    t.equal(
      (await client.get(BUCKET, 'meta/big')).status,
      404,
      'oversized metadata commits nothing',
    );
    expectProblem(
      t,
      await client.put(BUCKET, 'meta/badname', 'x', { 'X-Service-Meta-Bad.Name': 'v' }),
      400,
      'bad_request',
    );

    // Authentication.
    expectProblem(t, await json(await fetch(`${base}/buckets`)), 401, 'unauthorized');
    expectProblem(
      t,
      await json(
        await fetch(`${base}/buckets`, { headers: { Authorization: 'Bearer lwtk_not-a-token' } }),
      ),
      401,
      'unauthorized',
    );
    expectProblem(
      t,
      await json(
        await fetch(`${base}/buckets`, {
          headers: { Authorization: `Bearer ${client.token.slice(0, -2)}xx` },
        }),
      ),
      401,
      'unauthorized',
    );
    expectProblem(
      t,
      await json(
        await fetch(`${base}/buckets`, { headers: { Authorization: 'Basic Zm9vOmJhcg==' } }),
      ),
      401,
      'unauthorized',
    );
    const expiring = client.token;
    // Until the token runs out (at most 6 s after its mint, above): polled, not slept out.
    const expiry = Date.now() + 15_000;
    for (;;) {
      const probe = await fetch(`${base}/buckets`, {
        headers: { Authorization: `Bearer ${expiring}` },
      });
      await probe.arrayBuffer();
      if (probe.status !== 200) break;
      if (Date.now() > expiry) {
        t.fail('the token was still taken 15 s after the last login, its lifetime being 6 s');
        break;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    expectProblem(
      t,
      await json(
        await fetch(`${base}/buckets`, { headers: { Authorization: `Bearer ${expiring}` } }),
      ),
      401,
      'unauthorized',
    );
    const expiredPut = await fetch(`${base}/buckets/${BUCKET}/objects/expired`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${expiring}` },
      body: 'x',
    });
    expectProblem(t, await json(expiredPut), 401, 'unauthorized');
    await fresh();
    t.equal((await client.get(BUCKET, 'expired')).status, 404, 'an expired token commits nothing');
  });

  await t.test('HEAD and 204 answers leave the connection usable', async (t) => {
    await fresh();
    const sequential = await raw(
      port,
      [
        head('HEAD', `/buckets/${BUCKET}/objects/missing`, auth()),
        head('DELETE', `/buckets/${BUCKET}/objects/missing`, auth()),
        head('HEAD', `/buckets/${BUCKET}/objects/after/one`, auth()),
        head('GET', '/healthz', {}),
      ],
      { waitMs: 2000, pauseMs: 150 },
    );
    t.same(
      sequential.statuses,
      [404, 204, 200, 200],
      'four requests on one connection, four answers',
    );
    t.notOk(sequential.closed, 'the connection stays open');
    t.notMatch(sequential.text, /Content-Length: 9223372036854775808/i, 'no bogus Content-Length');
    t.match(
      sequential.text,
      new RegExp(`Content-Length: ${5 * MiB + 3}\\r\\n`, 'i'),
      "HEAD reports the object's length",
    );
    // Pipelined in one packet behind an asynchronous handler: uWS closes the connection.
    const pipelined = await raw(
      port,
      [head('GET', `/buckets/${BUCKET}/objects/after/one`, auth()) + head('GET', '/healthz', {})],
      { waitMs: 800 },
    );
    t.comment(
      `two requests pipelined in one packet: answers ${JSON.stringify(pipelined.statuses)}, connection ${pipelined.closed ? 'closed' : 'open'}`,
    );
    t.ok(
      pipelined.statuses.length === 2 || pipelined.closed,
      'pipelining gets every answer, or a closed connection (never a wrong answer)',
    );
  });

  await t.test('huge headers', async (t) => {
    await fresh();
    const oneHuge = await raw(
      port,
      [
        head('GET', `/buckets/${BUCKET}/objects/after/one`, {
          ...auth(),
          'X-Filler': 'a'.repeat(64 * 1024),
        }),
      ],
      { waitMs: 1000 },
    );
    t.comment(
      `a 64 KiB header: answers ${JSON.stringify(oneHuge.statuses)}, connection ${oneHuge.closed ? 'closed' : 'open'}`,
    );
    t.notOk(oneHuge.statuses.includes(200), 'a 64 KiB header is not served');
    t.ok(
      oneHuge.statuses.length > 0
        ? oneHuge.statuses.every((status) => status >= 400)
        : oneHuge.closed,
      'an error status, or the connection closed',
    );
    const many: Record<string, string> = auth();
    for (let index = 0; index < 500; index += 1) many[`X-Header-${index}`] = 'value';
    const manyHeaders = await raw(port, [head('GET', '/healthz', many)], { waitMs: 1000 });
    t.comment(
      `500 headers: answers ${JSON.stringify(manyHeaders.statuses)}, connection ${manyHeaders.closed ? 'closed' : 'open'}`,
    );
    t.ok(manyHeaders.statuses.length > 0 || manyHeaders.closed, 'answered or closed, not hung');
    const garbage = await raw(port, [randomBytes(4096)], { waitMs: 500 });
    t.ok(
      garbage.closed || garbage.statuses.every((status) => status >= 400),
      'random bytes get an error or a closed connection',
    );
    const slow = await raw(port, ['GET /api/v1/healthz HTTP/1.1\r\n', 'Host: x\r\n', '\r\n'], {
      pauseMs: 100,
      waitMs: 1500,
    });
    t.same(slow.statuses, [200], 'a request head that arrives in pieces is served');
  });

  await t.test('a chunk damaged on disk fails the read, never serves wrong bytes', async (t) => {
    // Not client input, but the same promise: what a client receives is right or visibly broken.
    await fresh();
    const body = randomBytes(6 * MiB);
    t.equal((await client.put(BUCKET, 'damaged/one', body)).status, 200);
    const chunks = await chunkEntriesOf(service.dataDir, 'inputs', BUCKET, 'damaged/one');
    t.ok(chunks.length >= 3, `${chunks.length} chunks`);
    const victim = chunks[1] as (typeof chunks)[number];
    const path = join(service.dataDir, 'segments', segmentFileName(victim.segmentId));
    const handle = await open(path, 'r+');
    const byte = Buffer.alloc(1);
    await handle.read(byte, 0, 1, victim.offset + 100);
    await handle.write(Buffer.from([(byte[0] as number) ^ 0x5a]), 0, 1, victim.offset + 100);
    const http = new HttpClient(service.publicUrl, client.token);
    t.teardown(() => http.destroy());
    const whole = await http.get(BUCKET, 'damaged/one').then(
      (response) => `${response.status} with ${response.body.length} bytes`,
      (error: unknown) => `cut: ${(error as Error).message}`,
    );
    t.comment(`GET of an object with a damaged chunk: ${whole}`);
    t.ok(
      whole.startsWith('cut') || /^5\d\d /.test(whole),
      'the client sees a 5xx or a cut connection, not a 200 with a whole body',
    );
    const firstLength = (chunks[0] as (typeof chunks)[number]).plainLength;
    const ranged = await http.get(BUCKET, 'damaged/one', { Range: `bytes=0-${firstLength - 1}` });
    t.equal(ranged.status, 206);
    t.ok(
      ranged.body.equals(body.subarray(0, firstLength)),
      'a range that avoids the damaged chunk is still served',
    );
    await handle.write(byte, 0, 1, victim.offset + 100);
    await handle.close();
    t.ok(
      (await http.get(BUCKET, 'damaged/one')).body.equals(body),
      'repaired, the object reads back',
    );
  });

  const health = await fetch(`${service.publicUrl}/healthz`);
  t.equal(health.status, 200, 'the service is healthy after the barrage');
  t.same(service.pids(), pidsAtStart, 'and no process was restarted');
  t.notMatch(service.output, /exited \(/, 'the supervisor saw no child exit');
});
