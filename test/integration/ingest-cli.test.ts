// Goal: `lightwell ingest DIR --bucket B` uploads a directory tree (nested paths become keys under
// --prefix, small and multi-megabyte files) byte for byte over several connections; run again it
// sends only what its journal does not hold (a resume); it exits 1 with a summary naming the
// failures when objects are refused, and 2 for a usage error.
// Method: `lightwell serve` on loopback, the CLI as a child process with credentials from the
// environment, reads through the native API.

import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { CLI, Service } from '../helpers/service.js';

function ingest(
  args: readonly string[],
  env: Record<string, string>,
): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, 'ingest', ...args],
      { env: { ...process.env, ...env }, timeout: 120_000 },
      (error, _stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stderr });
      },
    );
  });
}

t.test('lightwell ingest', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const data = await service.tenant('acme');
  t.equal((await data.request('POST', '/buckets', { json: { name: 'tree' } })).status, 201);
  const dir = mkdtempSync(join(tmpdir(), 'lw-ingest-cli-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const files = new Map<string, Buffer>();
  const add = (path: string, bytes: Buffer): void => {
    mkdirSync(join(dir, 'src', path, '..'), { recursive: true });
    writeFileSync(join(dir, 'src', path), bytes);
    files.set(path, bytes);
  };
  for (let i = 0; i < 40; i += 1) add(`a/b/${i}.txt`, Buffer.from(`file ${i}\n`));
  add('big.bin', randomBytes(3 * 1024 * 1024 + 5));
  add('empty', Buffer.alloc(0));
  const env = {
    LIGHTWELL_ENDPOINT: service.publicUrl.replace(/\/api\/v1$/, ''),
    LIGHTWELL_ACCESS_KEY_ID: data.accessKeyId,
    LIGHTWELL_SECRET_KEY: data.secretKey,
    XDG_CACHE_HOME: join(dir, 'cache'),
  };
  const source = join(dir, 'src');
  const args = [source, '--bucket', 'tree', '--prefix', 'up/', '--connections', '3'];

  let run = await ingest(args, env);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stderr, /42 stored, 0 already stored, 0 failed/);
  for (const [path, bytes] of files) {
    const read = await data.get('tree', `up/${path}`);
    t.equal(read.status, 200, path);
    t.ok(read.bytes.equals(bytes), `${path} reads back byte for byte`);
  }

  add('a/new.txt', Buffer.from('new'));
  run = await ingest(args, env);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stderr, /1 stored, 42 already stored, 0 failed/, 'only what is new is sent');

  run = await ingest([source, '--bucket', 'missing', '--no-progress'], env);
  t.equal(run.code, 1);
  t.match(run.stderr, /0 stored, 0 already stored, 43 failed/);
  t.match(run.stderr, /failed: a\/b\/0\.txt: 404 not_found/);

  t.equal((await ingest([source], env)).code, 2, '--bucket is required');
  t.equal((await ingest([source, '--bucket', 'tree', '--nope', 'x'], env)).code, 2);
});
