// Goal: processes started on their own and stopped together stop promptly and lose nothing. A
// gateway stopped at the same moment as its engine used to wait out its engine client's connect
// timeout (30 s) to register the seal of its open segment, and longer when requests were in
// flight; now it gives up on a gone engine at once, and the engine's next start recovers the
// segment, so the object written before reads back.
// Method: serve provisions a tenant and a bucket and stops; the engine and a gateway then run
// on their own on that data directory, take a PUT (which opens the gateway's segment), and get
// SIGTERM together; serve starts again and reads the object. The gateway's engine wait is set
// to an hour, so a gateway that waited for its gone engine would outlive this test's time limit
// by far: the test needs no wall-clock bound of its own shorter than that limit.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Service, DataClient } from '../helpers/service.js';

const bin = (name: string): string =>
  resolve(dirname(fileURLToPath(import.meta.url)), `../../bin/${name}.js`);

/** Starts a service binary on its own; resolves once it printed its ready line. */
function startAlone(name: string, args: readonly string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [bin(name), ...args, '--log-level', 'warn'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((ready, failed) => {
    child.stdout.on('data', (data: Buffer) => {
      output += data.toString();
      if (output.includes('ready')) ready(child);
    });
    child.stderr.on('data', (data: Buffer) => (output += data.toString()));
    child.once('exit', (code) => failed(new Error(`${name} exited ${String(code)}: ${output}`)));
  });
}

/** Resolves with the exit code, or 'still running' after `ms` (the child is then killed). */
function exitWithin(child: ChildProcess, ms: number): Promise<number | null | 'still running'> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((settled) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      settled('still running');
    }, ms);
    child.once('exit', (code) => {
      clearTimeout(timer);
      settled(code);
    });
  });
}

t.test('an engine and a gateway stopped together exit promptly; the write survives', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const provisioned = await service.tenant('alone');
  t.equal((await provisioned.request('POST', '/buckets', { json: { name: 'box' } })).status, 201);
  await service.stop();

  const where = ['--data-dir', service.dataDir];
  const engine = await startAlone('lightwell-engine', where);
  const gateway = await startAlone('lightwell-gateway', [
    ...where,
    '--engine.connect_wait',
    '1h',
    '--public-listen',
    `127.0.0.1:${service.publicPort}`,
  ]);
  const client = new DataClient(service.publicUrl, provisioned.accessKeyId, provisioned.secretKey);
  await client.login();
  t.equal((await client.put('box', 'k', 'durable before the stop')).status, 200);

  engine.kill('SIGTERM');
  gateway.kill('SIGTERM');
  // A prompt stop takes a second or two; a gateway waiting for its engine would take an hour.
  // The bounds are the test's own limit (180 s), less what the rest of the test needs.
  t.equal(
    await exitWithin(gateway, 120_000),
    0,
    'the gateway exits cleanly after SIGTERM, without waiting for its stopped engine',
  );
  t.equal(await exitWithin(engine, 30_000), 0, 'the engine exits cleanly after SIGTERM');

  await service.launch();
  const reader = new DataClient(service.publicUrl, provisioned.accessKeyId, provisioned.secretKey);
  await reader.login();
  const answer = await reader.get('box', 'k');
  t.equal(answer.status, 200);
  t.equal(answer.bytes.toString(), 'durable before the stop');
});
