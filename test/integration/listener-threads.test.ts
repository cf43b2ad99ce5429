// Goal: a gateway with two listener threads serves the public port from both, and the second
// listener's uploads and downloads work end to end through the shared pool: every object reads
// back byte-exact whichever listener stored or served it, and a stop is still clean.
// Method: serve with `--gateway-threads 2`; /proc/net/tcp must show two listening sockets on
// the public port (SO_REUSEPORT); then 24 PUTs and GETs of 3 MiB objects (chunks large enough
// for the pool), each on a connection of its own, so that the kernel spreads them over both
// listeners (all on one listener: a chance of 2^-23).
import t from 'tap';
import { request, type IncomingMessage } from 'node:http';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Service } from '../helpers/service.js';

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
): Promise<{ status: number; bytes: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method, agent: false, headers: { Authorization: `Bearer ${token}` } },
      (res: IncomingMessage) => {
        const parts: Buffer[] = [];
        res.on('data', (part: Buffer) => parts.push(part));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes: Buffer.concat(parts) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

t.test('two listener threads share the port and the pool', async (t) => {
  const service = await Service.start({ args: ['--gateway-threads', '2'] });
  t.teardown(() => service.close());
  t.equal(listeningSockets(service.publicPort), 2, 'two sockets listen on the public port');
  const client = await service.tenant('threads');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'box' } })).status, 201);

  const bodies = Array.from({ length: 24 }, () => randomBytes(3 * 1024 * 1024));
  const url = (i: number): string => `${service.publicUrl}/buckets/box/objects/o${i}`;
  const puts = await Promise.all(bodies.map((body, i) => send(url(i), 'PUT', client.token, body)));
  t.same(
    puts.map((answer) => answer.status),
    bodies.map(() => 200),
  );
  const gets = await Promise.all(bodies.map((_, i) => send(url(i), 'GET', client.token)));
  for (const [i, body] of bodies.entries()) {
    t.equal(gets[i]?.status, 200);
    t.ok(gets[i]?.bytes.equals(body), `o${i} reads back byte-exact`);
  }
  t.equal(await service.stop(), 0, 'serve exits cleanly');
});
