// Goal: sd_notify's messages are what a service manager reads: READY=1, STOPPING=1 and STATUS=
// as newline-separated assignments, a status on one line; nothing is sent without
// $NOTIFY_SOCKET; a missing native library is said once in the log and a failed send is
// logged, neither stops the caller; children get an environment without the socket. The native
// send (native/notify.c) reaches a datagram socket bound to a path and one with an abstract
// name ('@'), from this very process (the pid the kernel passes with the message), and refuses
// a socket address it cannot use.
// Method: `serviceManager` with a recording sender and a log into an array; then the real
// sender against the test receiver (test/helpers/notify-receiver.ts).
import t from 'tap';
import { Writable } from 'node:stream';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { native } from '../../src/util/libc.js';
import { serviceManager, withoutNotifySocket } from '../../src/util/sd-notify.js';
import { NotifyReceiver, receiverUnavailable } from '../helpers/notify-receiver.js';

function recordingLog(): { log: pino.Logger; records: Array<Record<string, unknown>> } {
  const records: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      records.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino(sink), records };
}

t.test('the messages a service manager reads', async (t) => {
  const sent: Array<[string, string]> = [];
  const { log, records } = recordingLog();
  const manager = serviceManager(log, { NOTIFY_SOCKET: '@unit' }, (socket, message) => {
    sent.push([socket, message]);
    return 0;
  });
  manager.ready('serving: http://127.0.0.1:1/api/v1');
  manager.status('gateway-1 exited (1);\nrestarting');
  manager.stopping('draining on SIGTERM');
  t.same(sent, [
    ['@unit', 'READY=1\nSTATUS=serving: http://127.0.0.1:1/api/v1'],
    ['@unit', 'STATUS=gateway-1 exited (1); restarting'],
    ['@unit', 'STOPPING=1\nSTATUS=draining on SIGTERM'],
  ]);
  t.same(records, [], 'nothing logged when every send succeeds');
});

t.test('without NOTIFY_SOCKET nothing is sent', async (t) => {
  let calls = 0;
  const { log } = recordingLog();
  for (const env of [{}, { NOTIFY_SOCKET: '' }]) {
    const manager = serviceManager(log, env, () => (calls += 1));
    manager.ready('ready');
    manager.stopping('stopping');
  }
  t.equal(calls, 0);
});

t.test('no native sender: said once in the log; a failed send is logged', async (t) => {
  const { log, records } = recordingLog();
  const without = serviceManager(log, { NOTIFY_SOCKET: '/run/x' }, null);
  without.ready('ready');
  without.stopping('stopping');
  t.equal(records.length, 1, 'one warning');
  t.match(records[0], { level: 40, notifySocket: '/run/x', msg: /native library.*Type=exec/ });
  const failing = serviceManager(log, { NOTIFY_SOCKET: '/run/x' }, () => 11);
  failing.ready('ready');
  t.match(records[1], { level: 40, errno: 11, message: 'READY=1', msg: 'sd_notify failed' });
});

t.test('children do not get the socket', async (t) => {
  const env = { NOTIFY_SOCKET: '@x', PATH: '/bin' };
  t.same(withoutNotifySocket(env), { PATH: '/bin' });
  t.equal(env.NOTIFY_SOCKET, '@x', 'the given environment is left as it was');
});

const unavailable =
  receiverUnavailable() ?? (native()?.notify ? undefined : 'the native library has no lw_notify');

t.test(
  'the native send reaches path and abstract sockets, from this process',
  { skip: unavailable === undefined ? false : `no native sd_notify here: ${unavailable}` },
  async (t) => {
    const notify = native()?.notify;
    if (!notify) throw new Error('no lw_notify');
    const dir = mkdtempSync(join(tmpdir(), 'lw-notify-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const names = [join(dir, 'notify'), `@lightwell-test-${randomBytes(8).toString('hex')}`];
    for (const name of names) {
      const receiver = NotifyReceiver.open(name);
      t.teardown(() => receiver.close());
      t.equal(notify(name, 'READY=1\nSTATUS=up'), 0, `sent to ${name}`);
      const message = await receiver.next('READY=1', Date.now() + 60_000);
      t.same(message.lines, ['READY=1', 'STATUS=up']);
      t.equal(message.pid, process.pid, 'the kernel names this process as the sender');
    }
    t.equal(notify('vsock:2:1234', 'READY=1'), 97, 'vsock: EAFNOSUPPORT');
    t.equal(notify('relative', 'READY=1'), 97, 'a relative path: EAFNOSUPPORT');
    t.equal(notify(`/${'x'.repeat(200)}`, 'READY=1'), 22, 'a name too long: EINVAL');
    t.equal(notify(join(dir, 'nobody'), 'READY=1'), 2, 'no socket there: ENOENT');
  },
);
