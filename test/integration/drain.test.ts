// Goal: readiness and graceful drain. `/readyz` answers 200 on both listeners while the service
// can serve; on SIGTERM readiness goes 503 first, the listeners stop accepting connections, an
// upload in flight finishes (its bytes read back after a restart), and then serve exits 0. A
// second signal stops at once (exit 1) without waiting for the upload. `/healthz` stays
// liveness.
// Method: serve with one gateway and one listener thread, so that one event loop sees every
// request in the order it arrives; an upload is sent in two halves on its own connection, and
// the probes go over a kept-alive connection opened before the signal (a new one is refused).
import t from 'tap';
import { request, Agent, type ClientRequest, type IncomingMessage } from 'node:http';
import { Service, type DataClient } from '../helpers/service.js';

const HALF_BYTES = 1024 * 1024;

interface Answer {
  status: number;
  body: string;
}

function get(url: string, agent: Agent | false): Promise<Answer> {
  return new Promise((resolveAnswer, reject) => {
    const req = request(url, { agent }, (res) => void collect(res).then(resolveAnswer, reject));
    req.on('error', reject);
    req.end();
  });
}

async function collect(res: IncomingMessage): Promise<Answer> {
  let body = '';
  for await (const chunk of res) body += (chunk as Buffer).toString();
  return { status: res.statusCode ?? 0, body };
}

/** A PUT whose first half is sent; `finish` sends the rest and resolves with the answer. */
async function startUpload(
  client: DataClient,
  path: string,
  body: Buffer,
): Promise<{ req: ClientRequest; finish(): Promise<Answer>; answer: Promise<Answer> }> {
  const req = request(`${client.baseUrl}${path}`, {
    method: 'PUT',
    agent: false,
    headers: { Authorization: `Bearer ${client.token}`, 'Content-Length': String(body.length) },
  });
  const answer = new Promise<Answer>((resolveAnswer, reject) => {
    req.on('response', (res) => void collect(res).then(resolveAnswer, reject));
    req.on('error', reject);
  });
  // Kept from an unhandled rejection when a test ends the connection on purpose.
  answer.catch(() => undefined);
  await new Promise<void>((written) => req.write(body.subarray(0, HALF_BYTES), () => written()));
  return {
    req,
    answer,
    finish: async () => {
      req.end(body.subarray(HALF_BYTES));
      return answer;
    },
  };
}

/** Probes `url` over `agent` until it answers `status`; the test's own limit bounds the wait. */
async function until(url: string, agent: Agent, status: number): Promise<Answer> {
  for (;;) {
    const answer = await get(url, agent);
    if (answer.status === status) return answer;
    await new Promise((resolveLater) => setTimeout(resolveLater, 20));
  }
}

/** Probes until the listener answers 503 or refuses the connection (it stopped). */
async function adminDrained(url: string, agent: Agent): Promise<boolean> {
  for (;;) {
    const answer = await get(url, agent).catch(
      (error: unknown) => (error as NodeJS.ErrnoException).code ?? '',
    );
    if (typeof answer === 'string') return /^(ECONNREFUSED|ECONNRESET|EPIPE)$/.test(answer);
    if (answer.status === 503) return true;
    await new Promise((resolveLater) => setTimeout(resolveLater, 20));
  }
}

const args = ['--gateway-threads', '1', '--workers', '1', '--shutdown.grace', '120s'];

t.test('SIGTERM drains: readiness 503 first, in-flight uploads finish', async (t) => {
  const service = await Service.start({ args });
  t.teardown(() => service.close());
  const client = await service.tenant('drain');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'drained' } })).status, 201);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const adminAgent = new Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => {
    agent.destroy();
    adminAgent.destroy();
  });
  const readyz = `${service.publicUrl}/readyz`;
  const adminReadyz = `${service.adminUrl}/readyz`;
  t.match(await get(readyz, agent), { status: 200, body: '{"status":"ready"}' });
  t.match(await get(adminReadyz, adminAgent), { status: 200, body: '{"status":"ready"}' });
  t.equal((await get(`${service.publicUrl}/healthz`, agent)).status, 200);

  const body = Buffer.alloc(2 * HALF_BYTES, 'lightwell drains ');
  const upload = await startUpload(client, '/buckets/drained/objects/in-flight', body);
  // One event loop: the probe's answer comes after the upload's headers were taken in.
  t.equal((await get(readyz, agent)).status, 200, 'ready with the upload in flight');
  const exited = new Promise<number | null>((resolveExit) =>
    service.child?.once('exit', resolveExit),
  );
  service.child?.kill('SIGTERM');
  const draining = await until(readyz, agent, 503);
  t.match(JSON.parse(draining.body), { code: 'unavailable' }, 'public readiness 503');
  // The admin process has nothing in flight: it may have drained and stopped already.
  t.ok(await adminDrained(adminReadyz, adminAgent), 'admin readiness 503, or its listener closed');
  await t.rejects(get(readyz, false), { code: 'ECONNREFUSED' }, 'no new connections');
  const answer = await upload.finish();
  t.equal(answer.status, 200, `the upload in flight finished: ${answer.body}`);
  t.equal(await exited, 0, 'serve exits 0 once drained');

  await service.launch();
  await client.login();
  const read = await client.get('drained', 'in-flight');
  t.equal(read.status, 200);
  t.ok(read.bytes.equals(body), 'the upload in flight is stored whole');
});

t.test('a second signal stops at once', async (t) => {
  const service = await Service.start({ args });
  t.teardown(() => service.close());
  const client = await service.tenant('again');
  t.equal((await client.request('POST', '/buckets', { json: { name: 'drained' } })).status, 201);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const readyz = `${service.publicUrl}/readyz`;
  const upload = await startUpload(
    client,
    '/buckets/drained/objects/cut',
    Buffer.alloc(2 * HALF_BYTES),
  );
  t.equal((await get(readyz, agent)).status, 200, 'ready with the upload in flight');
  const exited = new Promise<number | null>((resolveExit) =>
    service.child?.once('exit', resolveExit),
  );
  service.child?.kill('SIGTERM');
  await until(readyz, agent, 503);
  service.child?.kill('SIGTERM');
  t.equal(await exited, 1, 'serve stops at once, exit 1, with the upload unfinished');
  await t.rejects(upload.answer, 'the unfinished upload is cut, never acknowledged');
  upload.req.destroy();
});
