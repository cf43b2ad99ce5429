// Goal: a gateway with three listener threads serves the public port from all of them, and the
// other listeners' uploads and downloads work end to end through the shared pool and the shared
// ordered-stage threads (listeners 0 and 1 share one, listener 2 has the second): every object
// reads back byte-exact whichever listener stored or served it, and a stop is still clean.
// Method: serve with `--gateway-threads 3`; /proc/net/tcp must show three listening sockets on
// the public port (SO_REUSEPORT); then 36 PUTs and GETs of 3 MiB objects (three blocks each, so
// they pass the ordered stage; chunks large enough for the pool), each on a connection of its
// own, so that the kernel spreads them over the listeners (one left out: a chance of 3 * (2/3)^36,
// about 10^-6). Each PUT's answer must carry the CRC32C of its own body, which the ordered stage
// computes from the listener's arena.
import t from 'tap';
import { request, type IncomingMessage } from 'node:http';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Service } from '../helpers/service.js';
import { crc32cBase64 } from '../helpers/checksums.js';

function listeningSockets(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .filter((line) => {
      const fields = line.trim().split(/\s+/);
      return fields[1]?.endsWith(`:${hexPort}`) === true && fields[3] === '0A';
    }).length;
}

/** One request on a connection of its own (no keep-alive agent). */
function send(
  url: string,
  method: string,
  token: string,
  body?: Buffer,
): Promise<{ status: number; crc32c: string | undefined; bytes: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method, agent: false, headers: { Authorization: `Bearer ${token}` } },
      (res: IncomingMessage) => {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            crc32c: res.headers['x-service-checksum-crc32c'] as string | undefined,
            bytes: Buffer.concat(parts),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

t.test('three listener threads share the port, the pool and the ordered stages', async (t) => {
  const service = await Service.start({ args: ['--gateway-threads', '3'] });
  t.teardown(() => service.close());
  t.equal(listeningSockets(service.publicPort), 3, 'three sockets listen on the public port');
  const client = await service.tenant('threads');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'box' } })).status, 201);

  const bodies = Array.from({ length: 36 }, () => randomBytes(3 * 1024 * 1024));
  const url = (i: number): string => `${service.publicUrl}/buckets/box/objects/o${i}`;
  const puts = await Promise.all(bodies.map((body, i) => send(url(i), 'PUT', client.token, body)));
  t.same(
    puts.map((answer) => answer.status),
    bodies.map(() => 200),
  );
  // The whole-object checksum comes from the ordered stage, which reads the listener's arena:
  // the wrong arena would store the right bytes under the wrong checksum.
  t.same(
    puts.map((answer) => answer.crc32c),
    bodies.map((body) => crc32cBase64(body)),
    "every CRC32C was computed from its own upload's bytes",
  );
  const gets = await Promise.all(bodies.map((_, i) => send(url(i), 'GET', client.token)));
  for (const [i, body] of bodies.entries()) {
    t.equal(gets[i]?.status, 200);
    t.ok(gets[i]?.bytes.equals(body), `o${i} reads back byte-exact`);
  }
  t.equal(await service.stop(), 0, 'serve exits cleanly');
});
