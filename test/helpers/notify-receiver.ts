// The service manager's end of sd_notify, for tests: a datagram socket bound to a name (a path,
// or an abstract '@' name) through the native library's `lw_notify_listen` and
// `lw_notify_receive` (native/notify.c), which answer each message with the sender's pid as
// the kernel vouches for it (what systemd's NotifyAccess=main checks). Node has no AF_UNIX
// datagram socket of its own. A receive waits on a koffi worker thread, never on the event loop.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import type * as KoffiModule from 'koffi';
import { NATIVE_LIBRARY_PATH } from '../../src/util/libc.js';

export interface Notification {
  /** The message's assignments, e.g. READY=1 and STATUS=... */
  readonly lines: readonly string[];
  /** The sending process, from its SCM_CREDENTIALS. */
  readonly pid: number;
}

type Receive = ((
  fd: number,
  target: Buffer,
  capacity: number,
  pid: Int32Array,
  timeoutMs: number,
) => number) & {
  async(
    ...args: [number, Buffer, number, Int32Array, number, (e: unknown, r: number) => void]
  ): void;
};

interface Bound {
  listen(name: Buffer, length: number): number;
  receive: Receive;
  close(fd: number): number;
}

let bound: Bound | undefined | null = null;

/** The receiving functions, or why they cannot be had (the reason a test skips with). */
function bind(): Bound | string {
  if (bound === null) {
    bound = undefined;
    if (process.platform !== 'linux') return 'sd_notify is Linux only';
    if (!existsSync(NATIVE_LIBRARY_PATH))
      return `the native library is not built (${NATIVE_LIBRARY_PATH}; no C compiler?)`;
    const koffi = createRequire(import.meta.url)('koffi') as typeof KoffiModule;
    const library = koffi.load(NATIVE_LIBRARY_PATH);
    try {
      bound = {
        listen: library.func(
          'int32_t lw_notify_listen(const char *name, size_t length)',
        ) as Bound['listen'],
        receive: library.func(
          'int32_t lw_notify_receive(int32_t fd, uint8_t *target, size_t capacity, ' +
            'int32_t *pid, int32_t timeoutMs)',
        ) as Receive,
        close: library.func('int32_t lw_notify_close(int32_t fd)') as Bound['close'],
      };
    } catch (error) {
      return `the native library has no lw_notify_listen: ${String(error)}`;
    }
  }
  return bound ?? 'the native library could not be bound';
}

/** Why no receiver can be opened here; undefined when one can. */
export function receiverUnavailable(): string | undefined {
  const functions = bind();
  return typeof functions === 'string' ? functions : undefined;
}

/** How long one receive call waits on its worker thread before the loop looks again. */
const SLICE_MS = 500;

export class NotifyReceiver {
  private closed = false;
  /** Every message received so far, in order. */
  readonly all: Notification[] = [];
  /** Received and not yet taken by `next`. */
  private readonly received: Notification[] = [];

  private constructor(
    private readonly functions: Bound,
    private readonly fd: number,
    readonly name: string,
  ) {}

  /** Binds `name`; throws with the error number when the bind fails. */
  static open(name: string): NotifyReceiver {
    const functions = bind();
    if (typeof functions === 'string') throw new Error(functions);
    const bytes = Buffer.from(name, 'utf8');
    const fd = functions.listen(bytes, bytes.length);
    if (fd < 0) throw new Error(`cannot bind the notification socket ${name}: errno ${-fd}`);
    return new NotifyReceiver(functions, fd, name);
  }

  /**
   * The next message that has the line `line`, waiting until `deadline` (a `Date.now()` time);
   * rejects naming what it waited for and what came instead.
   */
  async next(line: string, deadline: number): Promise<Notification> {
    for (;;) {
      const found = this.received.find((message) => message.lines.includes(line));
      if (found) {
        this.received.splice(this.received.indexOf(found), 1);
        return found;
      }
      const left = deadline - Date.now();
      if (left <= 0 || this.closed) {
        const seen = this.received.map((message) => message.lines.join(' | ')).join('\n  ');
        throw new Error(`no ${line} on ${this.name} before the deadline; received:\n  ${seen}`);
      }
      const message = await this.receiveOne(Math.min(left, SLICE_MS));
      if (message) {
        this.all.push(message);
        this.received.push(message);
      }
    }
  }

  private receiveOne(timeoutMs: number): Promise<Notification | undefined> {
    const target = Buffer.alloc(4096);
    const pid = new Int32Array(1);
    return new Promise((resolve, reject) => {
      this.functions.receive.async(this.fd, target, target.length, pid, timeoutMs, (error, n) => {
        if (error) reject(error instanceof Error ? error : new Error(JSON.stringify(error)));
        else if (n === -110 /* ETIMEDOUT */) resolve(undefined);
        else if (n < 0) reject(new Error(`lw_notify_receive: errno ${-n}`));
        else
          resolve({
            lines: target.subarray(0, n).toString('utf8').split('\n'),
            pid: pid[0] as number,
          });
      });
    });
  }

  /** Closes the socket once no receive is waiting on it (call after the last `next`). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.functions.close(this.fd);
  }
}
