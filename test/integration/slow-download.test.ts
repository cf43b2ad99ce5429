// Goal: a client that stops reading a download is cut (uWebSockets.js's 10 s idle timer, re-armed
// only when the socket takes bytes) instead of holding its connection, its read-ahead and its
// object pin forever; the service goes on serving others.
// Method: a 64 MiB object (more than the socket buffers of both ends hold: the receive buffer
// may grow to 32 MiB here) fetched over a raw
// socket that is paused as soon as the first bytes arrive; the test waits for the request's
// audit row, which the gateway writes when the exchange ends. A normal read of the same object afterwards gets every byte.
import t from 'tap';
import { connect } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { Service } from '../helpers/service.js';

const MiB = 1024 * 1024;
/** The idle timer (10 s) plus room for a loaded machine: how long the end is waited for. */
const CLOSE_WAIT_MS = 90_000;

t.test('a download whose reader stopped reading is cut', async (t) => {
  const service = await Service.start({ args: ['--gateway-threads', '1'] });
  t.teardown(() => service.close());
  const client = await service.tenant('acme');
  await client.request('POST', '/buckets', { json: { name: 'reads' } });
  const body = randomBytes(64 * MiB);
  t.equal((await client.put('reads', 'large', body)).status, 200);

  const url = new URL(`${client.baseUrl}/buckets/reads/objects/large`);
  const socket = connect(Number(url.port), url.hostname);
  socket.on('error', () => undefined); // a reset is an end too
  socket.once('data', () => socket.pause()); // the reader stops reading here
  socket.write(
    `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\n` +
      `Authorization: Bearer ${client.token}\r\n\r\n`,
  );
  // The cut is the server's: it closes its end, and the FIN waits behind the bytes already in
  // the socket buffers, which this reader never reads. The request's audit row, written when
  // the exchange ends, is what shows it.
  const admin = service.adminToken();
  const ended = async (): Promise<boolean> => {
    const answer = await service.admin('GET', '/audit?tenant=acme&limit=50', admin);
    const rows = (answer.json as { events: Array<{ action: string; resource?: string }> }).events;
    return rows.some((row) => row.action === 'getObject' && row.resource?.endsWith('/large'));
  };
  const deadline = Date.now() + CLOSE_WAIT_MS;
  while (!(await ended())) {
    if (Date.now() > deadline)
      throw new Error(`no end of the stalled download within ${CLOSE_WAIT_MS} ms`);
    await delay(500);
  }
  t.pass('the stalled download ended on the server');
  socket.destroy();

  const read = await client.get('reads', 'large');
  t.equal(read.status, 200, 'a reader that reads gets the object');
  t.equal(
    createHash('sha256').update(read.bytes).digest('hex'),
    createHash('sha256').update(body).digest('hex'),
    'every byte of it',
  );
});
