// Goal: multipart uploads behave as data-api.md §4 and issue 4 say: parts are verified against
// every supplied checksum before they exist and keep their SHA-256; complete checks the list
// (ascending numbers, matching etags, 5 MiB minimum but for the last part, only uploaded
// parts, and a size or checksums an entry carries are the part's), applies quota, and builds
// the object from the parts' chunks without copying bytes (physical usage does not move at
// complete; parts left out are released); the object has an S3-style ETag and a true
// whole-object CRC32C; abort and expiry release the parts' bytes; a bucket with uploads in
// progress cannot be deleted.
// Method: real services on loopback driven over HTTP; physical bytes read from the admin
// usage report. A second service runs with a 2 s `multipart.expiry` and a 1 s background pass
// for the expiry case. Parts are random (incompressible, not deduplicated) and small but for
// the 5 MiB ones the minimum needs.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { crc32c } from '@node-rs/crc32';
import { Service, type DataClient, type ObjectAnswer, type Problem } from '../helpers/service.js';

const MiB = 1024 * 1024;
const sha256 = (body: Buffer): string => createHash('sha256').update(body).digest('base64');
const crc32cOf = (body: Buffer): string => {
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc32c(body), 0);
  return digest.toString('base64');
};

/** The fields of a parts page that these tests read; t.match checks the rest. */
interface PartsPage {
  parts: Array<{ partNumber: number; checksums: { SHA256: string } }>;
  isTruncated: boolean;
  nextPartNumberMarker?: number;
}

/** `GET /buckets/{b}/multipart`. */
interface UploadsPage {
  uploads: Array<{ uploadId: string }>;
}

const etagOf = (answer: { json: unknown }): string => (answer.json as ObjectAnswer).etag;
const codeOf = (answer: { json: unknown }): string => (answer.json as Problem).code;

async function physicalBytes(service: Service, admin: string, tenant: string): Promise<number> {
  const usage = await service.admin('GET', `/tenants/${tenant}/usage`, admin);
  return (usage.json as { physicalBytes: number }).physicalBytes;
}

async function createUpload(
  client: DataClient,
  bucket: string,
  key: string,
  body?: unknown,
): Promise<string> {
  const response = await client.request(
    'POST',
    `/buckets/${bucket}/multipart/${key}`,
    body === undefined ? {} : { json: body },
  );
  if (response.status !== 201)
    throw new RangeError(`create: ${response.status} ${JSON.stringify(response.json)}`);
  return (response.json as { uploadId: string }).uploadId;
}

function putPart(
  client: DataClient,
  bucket: string,
  key: string,
  uploadId: string,
  partNumber: number,
  body: Buffer,
  headers: Record<string, string> = {},
): ReturnType<DataClient['request']> {
  return client.request(
    'PUT',
    `/buckets/${bucket}/multipart/${uploadId}/parts/${partNumber}/${key}`,
    { body, headers },
  );
}

t.test('multipart uploads', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const admin = service.adminToken();
  const client = await service.tenant('acme', undefined, admin);
  t.equal((await client.request('POST', '/buckets', { json: { name: 'mpu' } })).status, 201);

  await t.test(
    'parts are verified, listed with SHA-256, and completed without copying',
    async (t) => {
      const key = 'dir/obj.bin';
      const uploadId = await createUpload(client, 'mpu', key, {
        contentType: 'application/x-demo',
        metadata: { origin: 'test' },
      });
      t.match(uploadId, /^[0-9a-f]{32}$/);
      const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(100 * 1024)];
      let response = await putPart(client, 'mpu', key, uploadId, 1, parts[0]!, {
        'X-Service-Checksum-SHA256': sha256(parts[0]!),
      });
      t.equal(response.status, 200);
      t.match(response.json, {
        partNumber: 1,
        size: 5 * MiB,
        checksums: { SHA256: sha256(parts[0]!), CRC32C: crc32cOf(parts[0]!) },
      });
      const etags = [etagOf(response)];

      for (const spelling of ['01', '00001', '%31', '%2B1']) {
        const padded = await client.request(
          'PUT',
          `/buckets/mpu/multipart/${uploadId}/parts/${spelling}/${key}`,
          { body: parts[0]! },
        );
        t.equal(padded.status, 400, `part number ${spelling} is not part 1`);
      }
      response = await putPart(client, 'mpu', key, uploadId, 2, parts[1]!, {
        'X-Service-Checksum-SHA256': sha256(parts[0]!),
      });
      t.equal(response.status, 400, 'a mismatched checksum');
      t.equal(codeOf(response), 'checksum_mismatch');
      response = await putPart(client, 'mpu', key, uploadId, 2, parts[1]!, {
        'X-Service-Checksum-CRC32C': 'not base64!',
      });
      t.equal(response.status, 400, 'a malformed checksum');
      response = await putPart(client, 'mpu', key, uploadId, 2, parts[1]!, {
        'X-Service-Checksum-MD5': 'AAAAAAAAAAAAAAAAAAAAAA==',
      });
      t.equal(response.status, 400, 'an unsupported algorithm');
      let listed = await client.request('GET', `/buckets/mpu/multipart/${uploadId}/parts/${key}`);
      t.same(
        (listed.json as PartsPage).parts.map((part) => part.partNumber),
        [1],
        'refused parts were never created',
      );
      t.equal((await putPart(client, 'mpu', key, uploadId, 0, parts[1]!)).status, 400, 'part 0');
      t.equal(
        (await putPart(client, 'mpu', key, uploadId, 10_001, parts[1]!)).status,
        400,
        'part 10001',
      );

      const [second, third] = await Promise.all([
        putPart(client, 'mpu', key, uploadId, 2, parts[1]!),
        putPart(client, 'mpu', key, uploadId, 3, parts[2]!, {
          'X-Service-Checksum-CRC32': 'AAAAAA==',
        }),
      ]);
      t.equal(second.status, 200);
      t.equal(third.status, 400, 'a wrong CRC32 refuses the last part');
      etags.push(etagOf(second));
      response = await putPart(client, 'mpu', key, uploadId, 3, parts[2]!);
      etags.push(etagOf(response));

      listed = await client.request(
        'GET',
        `/buckets/mpu/multipart/${uploadId}/parts/${key}?maxParts=2`,
      );
      t.equal((listed.json as PartsPage).isTruncated, true);
      t.equal((listed.json as PartsPage).nextPartNumberMarker, 2);
      const rest = await client.request(
        'GET',
        `/buckets/mpu/multipart/${uploadId}/parts/${key}?partNumberMarker=2`,
      );
      const all = [...(listed.json as PartsPage).parts, ...(rest.json as PartsPage).parts];
      const fromZero = await client.request(
        'GET',
        `/buckets/mpu/multipart/${uploadId}/parts/${key}?partNumberMarker=0`,
      );
      t.same(
        (fromZero.json as PartsPage).parts.map((part) => part.partNumber),
        [1, 2, 3],
        'partNumberMarker=0 starts at the first part',
      );
      t.same(
        all.map((part) => part.partNumber),
        [1, 2, 3],
      );
      t.same(
        all.map((part) => part.checksums.SHA256),
        parts.map((part) => sha256(part)),
        'SHA-256 of every part is kept',
      );
      const uploads = await client.request('GET', '/buckets/mpu/multipart?prefix=dir/');
      t.same(
        (uploads.json as UploadsPage).uploads.map((upload) => upload.uploadId),
        [uploadId],
      );

      const complete = (list: unknown): ReturnType<DataClient['request']> =>
        client.request('POST', `/buckets/mpu/multipart/${uploadId}/complete/${key}`, {
          json: { parts: list },
        });
      const listOf = (numbers: number[]): Array<{ partNumber: number; etag: string }> =>
        numbers.map((n) => ({ partNumber: n, etag: etags[n - 1]! }));
      t.equal((await complete([])).status, 400, 'an empty list');
      t.equal((await complete(listOf([2, 1, 3]))).status, 400, 'descending numbers');
      t.equal((await complete(listOf([1, 1, 3]))).status, 400, 'a repeated number');
      t.equal(
        (await complete([{ partNumber: 1, etag: etags[1] }, ...listOf([2, 3])])).status,
        400,
        'a wrong etag',
      );
      t.equal(
        (await complete([...listOf([1, 2, 3]), { partNumber: 4, etag: etags[0] }])).status,
        400,
        'a part never uploaded',
      );
      t.equal(
        codeOf(await client.request('DELETE', '/buckets/mpu')),
        'bucket_not_empty',
        'no bucket delete while an upload is in progress',
      );

      const before = await physicalBytes(service, admin, 'acme');
      response = await complete(
        listOf([1, 2, 3]).map((part) => ({ ...part, etag: part.etag.replaceAll('"', '') })),
      );
      t.equal(response.status, 200, 'unquoted etags match too');
      t.match(etagOf(response), /^"[0-9a-f]{32}-3"$/, 'S3-style multipart ETag');
      const whole = Buffer.concat(parts);
      t.match(response.json, {
        key,
        size: whole.length,
        contentType: 'application/x-demo',
        metadata: { origin: 'test' },
        checksums: { CRC32C: crc32cOf(whole) },
      });
      t.equal(
        await physicalBytes(service, admin, 'acme'),
        before,
        'complete moves chunk references: no byte is written or copied',
      );
      const read = await client.get('mpu', key);
      t.ok(read.bytes.equals(whole), 'the object is the parts in order');
      t.equal(read.headers.get('x-service-checksum-crc32c'), crc32cOf(whole));
      const ranged = await client.get('mpu', key, {
        Range: `bytes=${5 * MiB - 10}-${5 * MiB + 9}`,
      });
      t.ok(
        ranged.bytes.equals(whole.subarray(5 * MiB - 10, 5 * MiB + 10)),
        'a range across a part boundary',
      );
      t.equal(
        (await client.request('GET', `/buckets/mpu/multipart/${uploadId}/parts/${key}`)).status,
        404,
        'the upload is gone',
      );
      t.equal((await putPart(client, 'mpu', key, uploadId, 4, parts[2]!)).status, 404);
    },
  );

  await t.test('small parts, abort, unused parts released', async (t) => {
    const small = await createUpload(client, 'mpu', 'small');
    const a = randomBytes(100 * 1024);
    const first = etagOf(await putPart(client, 'mpu', 'small', small, 1, a));
    const second = etagOf(await putPart(client, 'mpu', 'small', small, 2, a));
    const response = await client.request(
      'POST',
      `/buckets/mpu/multipart/${small}/complete/small`,
      {
        json: {
          parts: [
            { partNumber: 1, etag: first },
            { partNumber: 2, etag: second },
          ],
        },
      },
    );
    t.equal(response.status, 400, 'a part under 5 MiB that is not the last');
    t.match((response.json as Problem).message, /5242880/);
    t.equal((await client.request('DELETE', `/buckets/mpu/multipart/${small}/small`)).status, 204);
    t.equal(
      (await client.request('DELETE', `/buckets/mpu/multipart/${small}/small`)).status,
      404,
      'aborted once',
    );
    t.equal(
      ((await client.request('GET', '/buckets/mpu/multipart?prefix=small')).json as UploadsPage)
        .uploads.length,
      0,
    );

    const base = await physicalBytes(service, admin, 'acme');
    const partial = await createUpload(client, 'mpu', 'partial');
    const big = randomBytes(5 * MiB);
    const unused = randomBytes(512 * 1024);
    const last = randomBytes(1000);
    const e1 = etagOf(await putPart(client, 'mpu', 'partial', partial, 1, big));
    await putPart(client, 'mpu', 'partial', partial, 2, unused);
    const e3 = etagOf(await putPart(client, 'mpu', 'partial', partial, 3, last));
    const held = await physicalBytes(service, admin, 'acme');
    t.ok(held - base >= big.length + unused.length + last.length, 'parts hold their bytes');
    t.equal(
      (
        await client.request('POST', `/buckets/mpu/multipart/${partial}/complete/partial`, {
          json: {
            parts: [
              { partNumber: 1, etag: e1 },
              { partNumber: 3, etag: e3 },
            ],
          },
        })
      ).status,
      200,
    );
    const after = await physicalBytes(service, admin, 'acme');
    t.ok(held - after >= unused.length, 'the part left out is released at complete');
    t.ok((await client.get('mpu', 'partial')).bytes.equals(Buffer.concat([big, last])));
  });

  await t.test('quota applies at complete; versioned buckets get a version id', async (t) => {
    t.equal(
      (await client.request('POST', '/buckets', { json: { name: 'mpv', versioning: 'Enabled' } }))
        .status,
      201,
    );
    const uploadId = await createUpload(client, 'mpv', 'q');
    const body = randomBytes(2 * MiB);
    const etag = etagOf(await putPart(client, 'mpv', 'q', uploadId, 1, body));
    // The part's bytes counted against maxBytes when it was uploaded
    // (quota-multipart.test.ts); complete adds the object, which maxObjects limits.
    const objects = (
      (await service.admin('GET', '/tenants/acme/usage', admin)).json as { objects: number }
    ).objects;
    t.equal(
      (await service.admin('PUT', '/tenants/acme/quota', admin, { maxObjects: objects })).status,
      200,
    );
    const complete = (): ReturnType<DataClient['request']> =>
      client.request('POST', `/buckets/mpv/multipart/${uploadId}/complete/q`, {
        json: { parts: [{ partNumber: 1, etag }] },
      });
    let response = await complete();
    t.equal(response.status, 507);
    t.equal(codeOf(response), 'quota_exceeded');
    t.equal(
      (await client.request('GET', `/buckets/mpv/multipart/${uploadId}/parts/q`)).status,
      200,
      'the upload survives a refused complete',
    );
    t.equal((await service.admin('DELETE', '/tenants/acme/quota', admin)).status, 204);
    response = await complete();
    t.equal(response.status, 200);
    t.match((response.json as ObjectAnswer).versionId, /^[0-9a-f]{16}$/);
    t.ok((await client.get('mpv', 'q')).bytes.equals(body));
  });

  await t.test('what a complete entry carries beside number and etag is checked', async (t) => {
    const uploadId = await createUpload(client, 'mpu', 'echo');
    const body = randomBytes(1000);
    const etag = etagOf(await putPart(client, 'mpu', 'echo', uploadId, 1, body));
    const complete = (entry: Record<string, unknown>): ReturnType<DataClient['request']> =>
      client.request('POST', `/buckets/mpu/multipart/${uploadId}/complete/echo`, {
        json: { parts: [{ partNumber: 1, etag, ...entry }] },
      });
    const refusals: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ size: 'x' }, 'bad_request', /parts\[0\]\.size must be a whole number/],
      [{ size: 999 }, 'bad_request', /part 1 is 1000 bytes, not 999/],
      [{ checksums: { CRC32C: 'wrong' } }, 'checksum_mismatch', /CRC32C checksum of part 1/],
      [{ checksums: { SHA256: sha256(randomBytes(8)) } }, 'checksum_mismatch', /SHA256/],
      [{ checksums: { SHA1: 'AAAA' } }, 'bad_request', /uploaded without a SHA1 checksum/],
      [{ checksums: { MD5: 'AAAA' } }, 'bad_request', /"MD5" is not CRC32/],
      [{ checksums: 'CRC32C' }, 'bad_request', /checksums must map algorithms/],
      [
        { lastModified: 'yesterday' },
        'bad_request',
        /lastModified: "yesterday" is not an RFC 3339/,
      ],
      [{ lastModified: '2026-02-30T00:00:00Z' }, 'bad_request', /is not an RFC 3339 timestamp/],
    ];
    for (const [entry, code, message] of refusals) {
      const response = await complete(entry);
      t.equal(response.status, 400, JSON.stringify(entry));
      t.equal(codeOf(response), code);
      t.match((response.json as Problem).message, message);
    }
    const response = await complete({
      size: 1000,
      checksums: { CRC32C: crc32cOf(body), SHA256: sha256(body) },
    });
    t.equal(response.status, 200, 'the true size and digests complete the upload');
    t.ok((await client.get('mpu', 'echo')).bytes.equals(body));
  });

  await t.test('a key shaped like <not an id>/complete/… is created, not completed', async (t) => {
    const response = await client.request(
      'POST',
      '/buckets/mpu/multipart/reports/complete/2024.csv',
    );
    t.equal(response.status, 201);
    const created = response.json as { key: string; uploadId: string };
    t.equal(created.key, 'reports/complete/2024.csv');
    t.equal(
      (
        await client.request(
          'DELETE',
          `/buckets/mpu/multipart/${created.uploadId}/reports/complete/2024.csv`,
        )
      ).status,
      204,
    );
  });

  await t.test('a complete of an upload id that is not one answers 404', async (t) => {
    // The same path with a complete body (`parts`, which no create body has) is a complete of
    // an unknown upload, as with a well-formed id that does not exist; no upload is created.
    const response = await client.request('POST', '/buckets/mpu/multipart/bogus/complete/k', {
      json: { parts: [{ partNumber: 1, etag: '"0123456789abcdef0123456789abcdef"' }] },
    });
    t.equal(response.status, 404);
    t.equal(codeOf(response), 'not_found');
    const uploads = await client.request('GET', '/buckets/mpu/multipart?prefix=bogus');
    t.same((uploads.json as UploadsPage).uploads, []);
  });

  await t.test(
    'create takes Content-Type and X-Service-Meta-* headers, as a PUT does',
    async (t) => {
      /** Creates an upload with `options`, completes it with one small part, answers its HEAD. */
      const roundTrip = async (
        key: string,
        options: { headers?: Record<string, string>; json?: unknown },
      ): Promise<Headers> => {
        const created = await client.request('POST', `/buckets/mpu/multipart/${key}`, options);
        if (created.status !== 201) throw new RangeError(`create ${key}: ${created.status}`);
        const uploadId = (created.json as { uploadId: string }).uploadId;
        const etag = etagOf(await putPart(client, 'mpu', key, uploadId, 1, randomBytes(1000)));
        const completed = await client.request(
          'POST',
          `/buckets/mpu/multipart/${uploadId}/complete/${key}`,
          { json: { parts: [{ partNumber: 1, etag }] } },
        );
        t.equal(completed.status, 200, `${key} completed`);
        return (await client.request('HEAD', `/buckets/mpu/objects/${key}`)).headers;
      };
      let head = await roundTrip('hdr-typed', {
        headers: { 'Content-Type': 'text/plain', 'X-Service-Meta-Owner': 'bob' },
      });
      t.equal(head.get('content-type'), 'text/plain', 'the bodiless create names the type');
      t.equal(head.get('x-service-meta-owner'), 'bob', 'metadata from the headers');
      head = await roundTrip('hdr-json', { headers: { 'Content-Type': 'application/json' } });
      t.equal(
        head.get('content-type'),
        'application/octet-stream',
        "a bodiless create's application/json is a client's habit, not the object's type",
      );
      head = await roundTrip('hdr-mixed', {
        headers: { 'X-Service-Meta-Owner': 'carol' },
        json: { contentType: 'text/csv' },
      });
      t.equal(head.get('content-type'), 'text/csv', 'the body names the type');
      t.equal(head.get('x-service-meta-owner'), 'carol');
      const both = await client.request('POST', '/buckets/mpu/multipart/hdr-both', {
        headers: { 'X-Service-Meta-Owner': 'dave' },
        json: { metadata: { owner: 'erin' } },
      });
      t.match(both, { status: 400, json: { code: 'bad_request', message: /not both/ } });
      const bad = await client.request('POST', '/buckets/mpu/multipart/hdr-bad', {
        headers: { 'X-Service-Meta-Owner': 'x'.repeat(3000) },
      });
      t.equal(bad.status, 400, 'header metadata is checked as on a PUT (2 KiB at most)');
      for (const key of ['hdr-typed', 'hdr-json', 'hdr-mixed'])
        await client.request('DELETE', `/buckets/mpu/objects/${key}`);
    },
  );

  await t.test('the bucket can be deleted once uploads and objects are gone', async (t) => {
    for (const key of ['dir/obj.bin', 'partial', 'echo'])
      await client.request('DELETE', `/buckets/mpu/objects/${key}`);
    t.equal((await client.request('DELETE', '/buckets/mpu')).status, 204);
  });
});

t.test('abandoned uploads expire and release their bytes', async (t) => {
  const service = await Service.start({
    env: { LIGHTWELL_MULTIPART_EXPIRY: '2s', LIGHTWELL_STORAGE_COMPACTION_INTERVAL: '1s' },
  });
  t.teardown(() => service.close());
  const admin = service.adminToken();
  const client = await service.tenant('old', undefined, admin);
  await client.request('POST', '/buckets', { json: { name: 'stale' } });
  const uploadId = await createUpload(client, 'stale', 'forgotten');
  t.equal((await putPart(client, 'stale', 'forgotten', uploadId, 1, randomBytes(MiB))).status, 200);
  t.ok((await physicalBytes(service, admin, 'old')) >= MiB, 'the part holds its bytes');
  const deadline = Date.now() + 20_000;
  while (
    ((await client.request('GET', '/buckets/stale/multipart')).json as UploadsPage).uploads.length >
      0 &&
    Date.now() < deadline
  ) {
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  t.equal(
    ((await client.request('GET', '/buckets/stale/multipart')).json as UploadsPage).uploads.length,
    0,
    'the background pass aborted it',
  );
  t.equal(await physicalBytes(service, admin, 'old'), 0, 'its chunk references were released');
  t.equal((await putPart(client, 'stale', 'forgotten', uploadId, 2, randomBytes(10))).status, 404);
  t.equal((await client.request('DELETE', '/buckets/stale')).status, 204);
});
