// Goal: an upload commits to the bucket it began in, not to whatever bucket holds its name when
// the body has arrived. A bucket deleted and made again while a PUT streams into it is another
// bucket (other settings, object lock perhaps): the PUT is answered 404 and nothing appears in
// the new bucket.
// Method: a PUT whose first half is sent, then the bucket is deleted and created again (with
// object lock, so that a wrong commit would also take the wrong settings), then the rest of the
// body; the answer and the new bucket's listing are checked. A PUT with only the delete is 404
// as well.
import t from 'tap';
import { request, type ClientRequest } from 'node:http';
import { Service } from '../helpers/service.js';

const HALF = 1024 * 1024;

/** A PUT sent in two halves: `first` writes the first, `finish` the rest and gives the status. */
function twoHalfPut(
  url: string,
  token: string,
): { first: Promise<void>; finish(): Promise<number> } {
  let req: ClientRequest | undefined;
  const status = new Promise<number>((resolve, reject) => {
    req = request(
      url,
      {
        method: 'PUT',
        headers: { Authorization: `Bearer ${token}`, 'Content-Length': String(2 * HALF) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
  });
  const started = req as unknown as ClientRequest;
  const first = new Promise<void>((resolve) =>
    started.write(Buffer.alloc(HALF, 1), () => resolve()),
  );
  return {
    first,
    finish: () => {
      started.end(Buffer.alloc(HALF, 2));
      return status;
    },
  };
}

t.test('a PUT into a bucket replaced while it streamed is not committed there', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const client = await service.tenant('acme');
  const create = async (json: object): Promise<number> =>
    (await client.request('POST', '/buckets', { json })).status;
  t.equal(await create({ name: 'swap' }), 201);

  const put = twoHalfPut(`${client.baseUrl}/buckets/swap/objects/late`, client.token);
  await put.first;
  t.equal((await client.request('DELETE', '/buckets/swap')).status, 204, 'deleted mid-upload');
  t.equal(await create({ name: 'swap', objectLock: true }), 201, 'made again, with object lock');
  t.equal(await put.finish(), 404, 'the upload is refused');
  const listing = await client.request('GET', '/buckets/swap/objects');
  t.match(listing.json, { objects: [] }, 'the new bucket holds nothing');

  const orphan = twoHalfPut(`${client.baseUrl}/buckets/swap/objects/gone`, client.token);
  await orphan.first;
  t.equal((await client.request('DELETE', '/buckets/swap')).status, 204, 'deleted only');
  t.equal(await orphan.finish(), 404, 'an upload into a deleted bucket is refused');
});
