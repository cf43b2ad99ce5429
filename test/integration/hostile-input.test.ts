// Goal: inputs found by an adversarial review get a clear 4xx and change nothing. A copy whose
// contentType carries CR/LF (which would have written headers and a body into every read of the
// object) is refused, as is such a Content-Type on a PUT or pinned by a signed URL; an admin
// request naming a tenant id of 3,000 characters leaves the audit log working (its row could not
// be indexed, and held back every row after it); a list prefix or key marker longer than any key
// is a 400, not a 500; a metadata header that is not ASCII is refused rather than stored cut
// short; a raw path that is not UTF-8 is refused rather than merged with other keys, and so is
// a JSON body on either API (its bytes would have become U+FFFD); an upload without
// Content-Length is 411.
// Method: `lightwell serve` on loopback; fetch, and raw sockets for what fetch will not send.
import t from 'tap';
import { connect } from 'node:net';
import { Service, type DataClient } from '../helpers/service.js';

interface Problem {
  readonly code: string;
  readonly message: string;
}

const BUCKET = 'hostile';

/** Sends `request` on a new connection and answers the status line's code and the text. */
function rawRequest(port: number, request: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    const done = (): void => {
      socket.destroy();
      const text = Buffer.concat(received).toString('latin1');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text });
    };
    socket.on('data', (data: Buffer) => {
      received.push(data);
      if (Buffer.concat(received).includes('\r\n\r\n')) setTimeout(done, 50);
    });
    socket.on('error', done);
    socket.on('close', done);
    socket.write(request);
  });
}

t.test('hostile input', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const port = Number(new URL(service.publicUrl).port);
  const owner = service.adminToken();
  const client: DataClient = await service.tenant('hostile');
  t.equal((await client.request('POST', '/buckets', { json: { name: BUCKET } })).status, 201);
  t.equal((await client.put(BUCKET, 'source', 'hello')).status, 200);
  const message = (json: unknown): string => (json as Problem).message;

  await t.test('a Content-Type cannot carry headers of its own', async (t) => {
    const copied = await client.request('POST', `/buckets/${BUCKET}/object-copy/copy`, {
      json: {
        sourceBucket: BUCKET,
        sourceKey: 'source',
        metadataDirective: 'REPLACE',
        contentType: 'text/html\r\nSet-Cookie: evil=1\r\n\r\n<script>alert(1)</script>',
      },
    });
    t.equal(copied.status, 400);
    t.match(message(copied.json), /contentType must be 1 to 256 visible ASCII characters/);
    t.equal((await client.get(BUCKET, 'copy')).status, 404, 'nothing was copied');
    const long = await client.put(BUCKET, 'typed', 'x', { 'Content-Type': `a/${'b'.repeat(300)}` });
    t.equal(long.status, 400);
    t.match(message(long.json), /Content-Type must be 1 to 256/);
    const minted = await client.request('POST', '/sign-url', {
      json: { method: 'PUT', bucket: BUCKET, key: 'signed', contentType: `a/${'b'.repeat(300)}` },
    });
    t.equal(minted.status, 400, 'a signed URL cannot pin a type that no upload may send');
  });

  await t.test('a huge tenant id in an admin path does not stop the audit log', async (t) => {
    const huge = 'z'.repeat(3000);
    t.equal((await service.admin('GET', `/tenants/${huge}`, owner)).status, 404);
    const after = await service.admin('GET', '/tenants/hostile', owner);
    t.equal(after.status, 200);
    const requestId = after.headers.get('x-request-id');
    const audit = await service.admin('GET', '/audit?limit=50', owner);
    const events = (audit.json as { events: Array<{ requestId: string; resource: string }> })
      .events;
    t.ok(
      events.some((event) => event.requestId === requestId),
      'the row of the request after it is there',
    );
    const hugeRow = events.find((event) => event.resource.includes('zzzz'));
    t.ok(hugeRow, 'the huge request has its row');
    t.ok((hugeRow?.resource.length ?? 0) <= 2048, 'with its resource cut to 2048 characters');
  });

  await t.test('ids longer than any the index holds are not found, not a failure', async (t) => {
    const long = 'b'.repeat(5000);
    for (const path of [`/buckets/${long}`, `/buckets/${long}/objects/k`]) {
      const answer = await client.request('GET', path);
      t.equal(answer.status, 404, path.slice(0, 30));
    }
    const owner = service.adminToken();
    for (const path of [`/tenants/${long}`, `/tenants/${long}/keys`, `/tenants/${long}/quota`]) {
      const answer = await service.admin('GET', path, owner);
      t.equal(answer.status, 404, path.slice(0, 30));
    }
    const rotate = await service.admin('POST', `/tenants/hostile/keys/${long}/rotate`, owner, {});
    t.equal(rotate.status, 404, 'rotating a key id of 5000 bytes');
  });

  await t.test('list parameters longer than any key are refused', async (t) => {
    const long = 'p'.repeat(2000);
    for (const path of [
      `/buckets/${BUCKET}/objects?prefix=${long}`,
      `/buckets/${BUCKET}/versions?prefix=${long}`,
      `/buckets/${BUCKET}/versions?keyMarker=${long}`,
      `/buckets/${BUCKET}/multipart?prefix=${long}`,
      `/buckets/${BUCKET}/multipart?keyMarker=${long}`,
    ]) {
      const answer = await client.request('GET', path);
      t.equal(answer.status, 400, path.slice(0, 60));
      t.match(message(answer.json), /the limit is 1024/);
    }
    const token = Buffer.from(`k${'q'.repeat(1400)}`).toString('base64url');
    const paged = await client.request(
      'GET',
      `/buckets/${BUCKET}/objects?continuationToken=${token}`,
    );
    t.equal(paged.status, 400, 'a forged continuation token too');
  });

  await t.test('metadata headers must be ASCII', async (t) => {
    const request = Buffer.concat([
      Buffer.from(
        `PUT /api/v1/buckets/${BUCKET}/objects/meta HTTP/1.1\r\nHost: x\r\n` +
          `Authorization: Bearer ${client.token}\r\nContent-Length: 1\r\nX-Service-Meta-city: Z`,
      ),
      Buffer.from('ürich', 'utf8'),
      Buffer.from('-ok\r\n\r\nx'),
    ]);
    const answer = await rawRequest(port, request);
    t.equal(answer.status, 400);
    t.match(answer.text, /printable ASCII/);
    t.equal((await client.get(BUCKET, 'meta')).status, 404, 'nothing stored');
  });

  await t.test('a raw path that is not UTF-8 is refused', async (t) => {
    for (const byte of [0xff, 0xfe, 0xc3]) {
      const request = Buffer.concat([
        Buffer.from(`PUT /api/v1/buckets/${BUCKET}/objects/u8/a`),
        Buffer.from([byte]),
        Buffer.from(
          ` HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${client.token}\r\nContent-Length: 3\r\n\r\nONE`,
        ),
      ]);
      const answer = await rawRequest(port, request);
      t.equal(answer.status, 400, `byte 0x${byte.toString(16)}`);
      t.match(answer.text, /not valid UTF-8/);
    }
    const listed = await client.request('GET', `/buckets/${BUCKET}/objects?prefix=u8/`);
    t.same((listed.json as { objects: unknown[] }).objects, [], 'no key was stored');
  });

  await t.test('a JSON body that is not UTF-8 is refused, on both APIs', async (t) => {
    const json = (text: string, byte: number): Buffer => {
      const [head = '', tail = ''] = text.split('#');
      return Buffer.concat([Buffer.from(head), Buffer.from([byte]), Buffer.from(tail)]);
    };
    for (const byte of [0xff, 0xc3]) {
      const tenant = await fetch(`${service.adminUrl}/tenants`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${owner}`, 'Content-Type': 'application/json' },
        body: json('{"id": "utf8-name", "name": "a#b"}', byte),
      });
      t.equal(tenant.status, 400, `admin, byte 0x${byte.toString(16)}`);
      t.match(((await tenant.json()) as Problem).message, /not valid UTF-8/);
      const tags = await client.request('PUT', `/buckets/${BUCKET}/object-tags/source`, {
        body: json('{"tags": [{"key": "k", "value": "a#b"}]}', byte),
        headers: { 'Content-Type': 'application/json' },
      });
      t.equal(tags.status, 400, `data, byte 0x${byte.toString(16)}`);
      t.equal((tags.json as Problem).code, 'bad_request');
      t.match(message(tags.json), /not valid UTF-8/);
    }
    t.equal((await service.admin('GET', '/tenants/utf8-name', owner)).status, 404, 'no tenant');
    const tags = await client.request('GET', `/buckets/${BUCKET}/object-tags/source`);
    t.same(tags.json, { tags: [] }, 'no tag');
  });

  await t.test('an upload without Content-Length is 411', async (t) => {
    const answer = await rawRequest(
      port,
      Buffer.from(
        `PUT /api/v1/buckets/${BUCKET}/objects/nocl HTTP/1.1\r\nHost: x\r\n` +
          `Authorization: Bearer ${client.token}\r\n\r\n`,
      ),
    );
    t.equal(answer.status, 411);
    t.match(answer.text, /"code":"bad_request"/);
    t.equal((await client.get(BUCKET, 'nocl')).status, 404);
    const empty = await client.put(BUCKET, 'empty', '');
    t.equal(empty.status, 200, 'Content-Length: 0 stores an empty object');
  });
});
