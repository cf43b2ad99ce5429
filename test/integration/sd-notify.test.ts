// Goal: under a service manager (systemd's Type=notify, $NOTIFY_SOCKET) `lightwell serve` sends
// READY=1 once both listeners are ready, with their URLs in STATUS=, and STOPPING=1 when SIGTERM
// starts the drain, every message from serve's own pid (what systemd's default
// NotifyAccess=main accepts) and none from its children; an engine run on its own sends its
// own READY=1 and STOPPING=1.
// Method: a datagram socket with an abstract name ('@', as systemd's) bound by the test
// receiver (test/helpers/notify-receiver.ts, native/notify.c), which learns each sender's pid
// from the kernel; serve started with NOTIFY_SOCKET naming it. The waits are for the messages
// and the exits, bounded only by the test's own limit (test/helpers/deadline.ts).
import t from 'tap';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { native } from '../../src/util/libc.js';
import { Service } from '../helpers/service.js';
import { testDeadline } from '../helpers/deadline.js';
import { NotifyReceiver, receiverUnavailable } from '../helpers/notify-receiver.js';

const deadline = testDeadline();
const unavailable =
  receiverUnavailable() ?? (native()?.notify ? undefined : 'the native library has no lw_notify');
/** Skips with the reason where the native library cannot send or receive. */
const skip = unavailable === undefined ? false : `no native sd_notify here: ${unavailable}`;

function socketName(): string {
  return `@lightwell-test-notify-${randomBytes(8).toString('hex')}`;
}

t.test(
  'serve: READY=1 when both listeners are ready, STOPPING=1 at the drain',
  { skip },
  async (t) => {
    const receiver = NotifyReceiver.open(socketName());
    t.teardown(() => receiver.close());
    const service = await Service.start({ env: { NOTIFY_SOCKET: receiver.name } });
    t.teardown(() => service.close());
    const serve = service.child;
    if (!serve?.pid) throw new Error('serve has no pid');
    const ready = await receiver.next('READY=1', deadline);
    t.equal(ready.pid, serve.pid, "READY=1 comes from serve, the unit's main process");
    const status = ready.lines.find((line) => line.startsWith('STATUS='));
    t.equal(
      status,
      `STATUS=serving: ${service.publicUrl}, ${service.adminUrl}`,
      'STATUS names both listeners',
    );

    const exited = new Promise<number | null>((settle) => serve.once('exit', settle));
    serve.kill('SIGTERM');
    const stopping = await receiver.next('STOPPING=1', deadline);
    t.equal(stopping.pid, serve.pid, 'STOPPING=1 comes from serve');
    t.match(stopping.lines, [/^STOPPING=1$/, /^STATUS=draining on SIGTERM/]);
    t.equal(await exited, 0, 'serve exits 0 once drained');
    t.same(
      receiver.all.map((message) => message.pid).filter((pid) => pid !== serve.pid),
      [],
      'no child speaks for the unit',
    );
  },
);

t.test('an engine on its own sends its own READY=1 and STOPPING=1', { skip }, async (t) => {
  // serve makes the data directory; the engine then runs on it alone.
  const service = await Service.start();
  t.teardown(() => service.close());
  await service.stop();
  const receiver = NotifyReceiver.open(socketName());
  t.teardown(() => receiver.close());
  const engineBin = resolve(
    dirname(fileURLToPath(import.meta.url)),
    '../../bin/lightwell-engine.js',
  );
  const engine = spawn(
    process.execPath,
    [engineBin, '--data-dir', service.dataDir, '--log-level', 'warn'],
    { stdio: 'ignore', env: { ...process.env, NOTIFY_SOCKET: receiver.name } },
  );
  t.teardown(() => engine.kill('SIGKILL'));
  const exited = new Promise<number | null>((settle) => engine.once('exit', settle));
  const ready = await receiver.next('READY=1', deadline);
  t.equal(ready.pid, engine.pid, 'from the engine itself');
  t.match(ready.lines, ['READY=1', 'STATUS=lightwell-engine: ready']);
  engine.kill('SIGTERM');
  const stopping = await receiver.next('STOPPING=1', deadline);
  t.equal(stopping.pid, engine.pid);
  t.equal(await exited, 0, 'the engine exits 0');
});
