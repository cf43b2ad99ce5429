// Goal: the backup target's S3 client (src/engine/s3-target.ts) sends a request again after the
// endpoint's transient answers (503 SlowDown, 500) and after a connection cut before any answer,
// signed afresh each time; a refusal that is not transient (403) fails at once, and a request
// still failing after its tries fails with the endpoint's S3 error code. A HEAD says whether an
// object is there; a download that sends more than the bytes expected is stopped.
// Method: a plain HTTP server on loopback that answers each request as the test's script says
// and counts them; a download into a temporary directory.
import t, { type Test } from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { S3Target } from '../../src/engine/s3-target.js';

type Step = 'ok' | 'slow-down' | 'internal' | 'forbidden' | 'cut' | 'missing' | 'big';

async function endpoint(t: Test, script: Step[]): Promise<{ target: S3Target; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    seen.push(String(request.headers['authorization']).slice(0, 16));
    request.resume();
    request.on('end', () => {
      const step = script.shift() ?? 'ok';
      if (step === 'cut') {
        request.socket.destroy();
        return;
      }
      if (step === 'big') {
        response.writeHead(200, { 'content-type': 'application/octet-stream' });
        response.end(Buffer.alloc(100_000, 7));
        return;
      }
      if (step === 'missing') {
        response.writeHead(404, { 'content-type': 'application/xml' });
        response.end(
          request.method === 'HEAD' ? undefined : '<Error><Code>NoSuchKey</Code></Error>',
        );
        return;
      }
      const [status, code] =
        step === 'ok'
          ? [200, '']
          : step === 'slow-down'
            ? [503, 'SlowDown']
            : step === 'internal'
              ? [500, 'InternalError']
              : [403, 'AccessDenied'];
      response.writeHead(status, { 'content-type': 'application/xml' });
      response.end(code ? `<Error><Code>${code}</Code></Error>` : '');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  const target = new S3Target({
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    bucket: 'backups',
    accessKeyId: 'AKTEST',
    secretAccessKey: 'secret-never-shown',
  });
  return { target, seen };
}

t.test('transient answers and a cut connection are tried again', async (t) => {
  const { target, seen } = await endpoint(t, ['slow-down', 'cut', 'internal', 'ok']);
  await target.putBytes('b/manifest.json', Buffer.from('{}'));
  t.equal(seen.length, 4, 'sent four times: 503, cut, 500, then 200');
  t.ok(
    seen.every((header) => header.startsWith('AWS4-HMAC-SHA256')),
    'each one signed',
  );
});

t.test('a refusal that is not transient fails at once', async (t) => {
  const { target, seen } = await endpoint(t, ['forbidden', 'ok']);
  await t.rejects(target.putBytes('b/x', Buffer.from('x')), { code: 'unavailable' });
  t.equal(seen.length, 1, 'sent once');
});

t.test('a request still failing after its tries fails with the S3 code', async (t) => {
  const { target, seen } = await endpoint(t, ['slow-down', 'slow-down', 'slow-down', 'slow-down']);
  await t.rejects(target.putBytes('b/x', Buffer.from('x')), /SlowDown/);
  t.equal(seen.length, 4, 'four tries');
});

t.test('has() asks with a HEAD; a download past its expected size is stopped', async (t) => {
  const { target, seen } = await endpoint(t, ['missing', 'ok', 'big']);
  t.equal(await target.has('b/manifest.json'), false, '404: not there');
  t.equal(await target.has('b/manifest.json'), true, '200: there');
  const dir = mkdtempSync(join(tmpdir(), 'lw-s3-target-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  await t.rejects(target.getFile('b/objects/1', join(dir, 'one'), 1000), {
    code: 'corrupt_data',
  });
  t.equal(seen.length, 3);
});
