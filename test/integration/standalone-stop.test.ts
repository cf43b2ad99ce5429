// Goal: processes started on their own and stopped together stop promptly and lose nothing. A
// gateway stopped at the same moment as its engine used to wait out its engine client's connect
// timeout (30 s) to register the seal of its open segment, and longer when requests were in
// flight; now it gives up on a gone engine at once, and the engine's next start recovers the
// segment, so the object written before reads back.
// Method: serve provisions a tenant and a bucket and stops; the engine and a gateway then run
// on their own on that data directory, take a PUT (which opens the gateway's segment), and get
// SIGTERM together; serve starts again and reads the object. The test waits on events only:
// each process's log line that it took the signal ('stopping', 'engine stopped') and its exit.
// The gateway's engine wait is set to an hour, so a gateway that waited for its gone engine
// would outlive the test's own time limit by far; the only bound on the waits is that limit
// (test/helpers/deadline.ts), less a margin to report which event did not come and what the
// process printed, instead of tap's dump of open handles.
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Service, DataClient } from '../helpers/service.js';
import { testDeadline } from '../helpers/deadline.js';

const bin = (name: string): string =>
  resolve(dirname(fileURLToPath(import.meta.url)), `../../bin/${name}.js`);

const deadline = testDeadline();

/** A process started on its own, with everything it printed and its exit when it came. */
interface Alone {
  readonly name: string;
  readonly child: ChildProcess;
  output: string;
  /** Settles with the exit code (or the signal's name) once the process has exited. */
  readonly exited: Promise<number | string>;
  /** Registered waits for a line of output. */
  readonly watchers: Array<{ text: string; seen: () => void }>;
}

/** Starts a service binary on its own; resolves once it printed its ready line. */
async function startAlone(name: string, args: readonly string[]): Promise<Alone> {
  const child = spawn(process.execPath, [bin(name), ...args, '--log-level', 'info'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | string>((settle) =>
    child.once('exit', (code, signal) => settle(code ?? signal ?? 'unknown')),
  );
  const alone: Alone = { name, child, output: '', exited, watchers: [] };
  const take = (data: Buffer): void => {
    alone.output += data.toString();
    for (const watcher of alone.watchers) if (alone.output.includes(watcher.text)) watcher.seen();
  };
  child.stdout.on('data', take);
  child.stderr.on('data', take);
  const ready = printed(alone, `${name}: ready`);
  const ended = exited.then((code) => {
    throw new Error(`${name} exited (${String(code)}) before its ready line:\n${alone.output}`);
  });
  await waitFor(alone, `its ready line`, Promise.race([ready, ended]));
  return alone;
}

/** Resolves once `alone` has printed `text` (at once if it already has). */
function printed(alone: Alone, text: string): Promise<void> {
  return new Promise((seen) => {
    alone.watchers.push({ text, seen });
    if (alone.output.includes(text)) seen();
  });
}

/**
 * `event`, or a rejection that names what `alone` was waited for, with its output, once the
 * test's own limit is near; the process is then killed.
 */
async function waitFor<T>(alone: Alone, what: string, event: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    if (deadline === Infinity) return;
    timer = setTimeout(
      () => {
        alone.child.kill('SIGKILL');
        reject(
          new Error(
            `waited until the test's time limit for ${alone.name}: ${what}; it printed:\n` +
              alone.output,
          ),
        );
      },
      Math.max(0, deadline - Date.now()),
    );
  });
  try {
    return await Promise.race([event, late]);
  } finally {
    clearTimeout(timer);
  }
}

t.test('an engine and a gateway stopped together exit promptly; the write survives', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const provisioned = await service.tenant('alone');
  t.equal((await provisioned.request('POST', '/buckets', { json: { name: 'box' } })).status, 201);
  await service.stop();

  const where = ['--data-dir', service.dataDir];
  const engine = await startAlone('lightwell-engine', where);
  t.teardown(() => engine.child.kill('SIGKILL'));
  const gateway = await startAlone('lightwell-gateway', [
    ...where,
    '--engine.connect_wait',
    '1h',
    '--public-listen',
    `127.0.0.1:${service.publicPort}`,
  ]);
  t.teardown(() => gateway.child.kill('SIGKILL'));
  const client = new DataClient(service.publicUrl, provisioned.accessKeyId, provisioned.secretKey);
  await client.login();
  t.equal((await client.put('box', 'k', 'durable before the stop')).status, 200);

  engine.child.kill('SIGTERM');
  gateway.child.kill('SIGTERM');
  // The signal taken, then the exit: a failure says which of the two never came.
  await waitFor(gateway, "its 'stopping' line after SIGTERM", printed(gateway, '"stopping"'));
  t.equal(
    await waitFor(gateway, 'its exit after SIGTERM (with its engine stopped too)', gateway.exited),
    0,
    'the gateway exits cleanly after SIGTERM, without waiting for its stopped engine',
  );
  await waitFor(
    engine,
    "its 'engine stopped' line after SIGTERM",
    printed(engine, 'engine stopped'),
  );
  t.equal(
    await waitFor(engine, 'its exit after SIGTERM', engine.exited),
    0,
    'the engine exits cleanly after SIGTERM',
  );

  await service.launch();
  const reader = new DataClient(service.publicUrl, provisioned.accessKeyId, provisioned.secretKey);
  await reader.login();
  const answer = await reader.get('box', 'k');
  t.equal(answer.status, 200);
  t.equal(answer.bytes.toString(), 'durable before the stop');
});
