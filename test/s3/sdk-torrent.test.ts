// Goal: GetObjectTorrent through the AWS SDK answers a BitTorrent metainfo file of the object:
// its length, its key as the name, 256 KiB pieces whose SHA-1s are those of the object's bytes,
// and the object's URL as web seed; a missing key is NoSuchKey, an object under a customer key
// gets none (400 InvalidRequest), another tenant without a grant is refused, and a public-read
// object's torrent is served to anyone.
// Method: a real `lightwell serve`, two tenants, @aws-sdk/client-s3, fetch for anonymous reads,
// a small bencode reader here.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { CreateBucketCommand, GetObjectTorrentCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';
import { bencode } from '../../src/s3/torrent.js';

type Decoded = number | Buffer | Decoded[] | Map<string, Decoded>;

/** Reads one bencoded value at `at`; answers it and where it ends. */
function decode(bytes: Buffer, at = 0): [Decoded, number] {
  const kind = String.fromCharCode(bytes[at] ?? 0);
  if (kind === 'i') {
    const end = bytes.indexOf('e', at);
    return [Number(bytes.subarray(at + 1, end).toString()), end + 1];
  }
  if (kind === 'l' || kind === 'd') {
    const items: Decoded[] = [];
    let next = at + 1;
    while (bytes[next] !== 'e'.charCodeAt(0)) {
      const [item, end] = decode(bytes, next);
      items.push(item);
      next = end;
    }
    if (kind === 'l') return [items, next + 1];
    const map = new Map<string, Decoded>();
    for (let i = 0; i < items.length; i += 2)
      map.set((items[i] as Buffer).toString(), items[i + 1] as Decoded);
    return [map, next + 1];
  }
  const colon = bytes.indexOf(':', at);
  const length = Number(bytes.subarray(at, colon).toString());
  return [bytes.subarray(colon + 1, colon + 1 + length), colon + 1 + length];
}

t.test('bencode writes sorted dictionaries, strings by byte length and integers', async (t) => {
  t.equal(
    bencode({ b: 1, a: ['é', Buffer.from([0])] }).toString('latin1'),
    'd1:al2:\xc3\xa91:\x00e1:bi1ee',
  );
  t.equal(bencode(-3).toString(), 'i-3e');
});

t.test('GetObjectTorrent through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const s3 = s3ClientFor(origin, await service.tenant('alice'));
  const bob = s3ClientFor(origin, await service.tenant('bob'));
  t.teardown(() => [s3, bob].forEach((client) => client.destroy()));
  await s3.send(new CreateBucketCommand({ Bucket: 'seeds' }));
  const data = randomBytes(600_000);
  await s3.send(new PutObjectCommand({ Bucket: 'seeds', Key: 'dir/movie.mpg', Body: data }));

  const got = await s3.send(new GetObjectTorrentCommand({ Bucket: 'seeds', Key: 'dir/movie.mpg' }));
  const file = Buffer.from((await got.Body?.transformToByteArray()) ?? []);
  const [metainfo, end] = decode(file);
  t.equal(end, file.length, 'one bencoded value');
  const top = metainfo as Map<string, Decoded>;
  const info = top.get('info') as Map<string, Decoded>;
  t.equal(info.get('length'), data.length);
  t.equal((info.get('name') as Buffer).toString(), 'dir/movie.mpg');
  t.equal(info.get('piece length'), 256 * 1024);
  const expected = [0, 262_144, 524_288].map((start) =>
    createHash('sha1')
      .update(data.subarray(start, start + 262_144))
      .digest(),
  );
  t.same(info.get('pieces'), Buffer.concat(expected), 'the SHA-1 of each piece of the bytes');
  t.same(
    (top.get('url-list') as Buffer[]).map(String),
    [`${origin}/seeds/dir/movie.mpg`],
    'the object is its own web seed',
  );

  t.same(
    await s3ErrorOf(s3.send(new GetObjectTorrentCommand({ Bucket: 'seeds', Key: 'absent' }))),
    { name: 'NoSuchKey', status: 404 },
  );
  t.same(
    await s3ErrorOf(
      bob.send(new GetObjectTorrentCommand({ Bucket: 'seeds', Key: 'dir/movie.mpg' })),
    ),
    { name: 'AccessDenied', status: 403 },
    'another tenant without a grant',
  );
  const ssec = { SSECustomerAlgorithm: 'AES256', SSECustomerKey: 'c'.repeat(32) };
  await s3.send(new PutObjectCommand({ Bucket: 'seeds', Key: 'secret', Body: 'x', ...ssec }));
  t.same(
    await s3ErrorOf(s3.send(new GetObjectTorrentCommand({ Bucket: 'seeds', Key: 'secret' }))),
    { name: 'InvalidRequest', status: 400 },
    'no torrent of an object under a customer key',
  );

  const anonymous = await fetch(`${origin}/seeds/dir/movie.mpg?torrent`);
  t.equal(anonymous.status, 403, 'a private object: refused to anyone');
  await anonymous.arrayBuffer();
  await s3.send(
    new PutObjectCommand({ Bucket: 'seeds', Key: 'open', Body: 'hello', ACL: 'public-read' }),
  );
  const open = await fetch(`${origin}/seeds/open?torrent`);
  t.equal(open.status, 200, 'a public-read object: served to anyone');
  t.equal(open.headers.get('content-type'), 'application/x-bittorrent');
  const [openInfo] = decode(Buffer.from(await open.arrayBuffer()));
  const openPieces = (openInfo as Map<string, Decoded>).get('info') as Map<string, Decoded>;
  t.same(openPieces.get('pieces'), createHash('sha1').update('hello').digest());
});
