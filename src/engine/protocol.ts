// The engine command protocol: length-prefixed msgpack frames over the engine's unix socket.
//
// Frame: u32 LE body length, then a msgpack body. A request is `{i: id, o: op, a: args}`; its
// response is `{i: id, r: result}` or `{i: id, e: WireError}`. Requests are pipelined: a client
// sends as many as it likes and matches responses by id, in any order. Errors cross the socket
// as data and are rebuilt into typed errors with `fromWire`. The engine also sends frames
// unasked, `{p: name, a: args}` (a push: see audit-barrier.ts), which a client hands to the
// handler it registered for the name (`EngineClient.onPush`).

import { createConnection, type Socket } from 'node:net';
import { Packr } from 'msgpackr';
import { EngineUnavailable, PayloadTooLarge, fromWire, type WireError } from '../util/errors.js';
import type { CommandArgs, CommandName, CommandResult } from './commands.js';

export const FRAME_BYTES_MAX = 64 * 1024 * 1024;
/**
 * A group of `putObject` commands sent as one (`{items}`), answered with one `{r}` or `{e}` per
 * item: each item commits or fails on its own, in the same group commit (engine.ts).
 */
export const PUT_GROUP_COMMAND = 'putObjects';
/** Items of one `putObjects`; a group's manifests are of inline chunks, a few hundred bytes. */
export const PUT_GROUP_ITEMS_MAX = 1024;
const packr = new Packr({ useRecords: false, mapsAsObjects: true });

export interface Request {
  readonly i: number;
  readonly o: string;
  readonly a: unknown;
  /**
   * The deadline (ms since the epoch, this machine's clock): the engine refuses a command it
   * would start applying later, since its caller has given up on it by then.
   */
  readonly d?: number;
}

export interface Response {
  readonly i: number;
  readonly r?: unknown;
  readonly e?: WireError;
}

/** A frame the engine sends unasked. */
export interface Push {
  readonly p: string;
  readonly a: unknown;
}

function isPush(message: unknown): message is Push {
  return typeof (message as { p?: unknown } | null)?.p === 'string';
}

export function encodeFrame(message: object): Buffer {
  const body = packr.pack(message);
  const frame = Buffer.allocUnsafe(4 + body.length);
  frame.writeUInt32LE(body.length, 0);
  body.copy(frame, 4);
  return frame;
}

/**
 * Writes frames to a socket, gathering every frame of one event-loop iteration into one write
 * (a request or a commit group yields many frames at once; a syscall and a wake-up of the peer
 * per frame cost more than the frames).
 */
export class FrameWriter {
  private corked = false;

  constructor(private readonly socket: Socket) {}

  write(frame: Buffer): void {
    if (this.socket.destroyed) return;
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      setImmediate(() => {
        this.corked = false;
        this.socket.uncork();
      });
    }
    this.socket.write(frame);
  }
}

/** Splits a byte stream into decoded messages; keeps a partial frame for the next push. */
export class FrameDecoder {
  private pending: Buffer = Buffer.alloc(0);

  push(data: Buffer): unknown[] {
    this.pending = this.pending.length === 0 ? data : Buffer.concat([this.pending, data]);
    const messages: unknown[] = [];
    let offset = 0;
    while (this.pending.length - offset >= 4) {
      const length = this.pending.readUInt32LE(offset);
      if (length > FRAME_BYTES_MAX) throw PayloadTooLarge(`engine frame of ${length} bytes`);
      if (this.pending.length - offset - 4 < length) break;
      messages.push(packr.unpack(this.pending.subarray(offset + 4, offset + 4 + length)));
      offset += 4 + length;
    }
    this.pending = offset === this.pending.length ? Buffer.alloc(0) : this.pending.subarray(offset);
    return messages;
  }
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
  /** When the caller stops waiting (ms since the epoch); Infinity for a long command. */
  readonly giveUpAt: number;
}

/** A call's default time limit (`engine.call_timeout`). */
export const CALL_TIMEOUT_MS = 15_000;
/**
 * Commands that may legitimately run for long (a scrub reads a tenant's every chunk; a
 * connection command waits for other work): they carry no deadline.
 */
const LONG_COMMANDS: ReadonlySet<string> = new Set([
  'scrubTenantChunks',
  'auditBarrier',
  // A cluster member's rebalance copies a tenant's data between nodes; a refresh reconnects.
  'clusterRepair',
  'clusterReclaim',
  'clusterRefresh',
  // One transaction over every tenant and key (master-key-rotation.ts): seconds on a large store.
  'rotateMasterKey',
]);
/**
 * The caller waits this much past the deadline it sent before it gives up, so that an engine
 * that refuses a late command at its deadline is heard first.
 */
const GIVE_UP_GRACE_MS = 1000;

/** The pause before a connection is made again at once (`reconnectWhile`). */
const RECONNECT_DELAY_MS = 20;

/** How long a process waits for the engine before it logs that it is waiting. */
const WAIT_NOTICE_MS = 1000;

/**
 * A pipelined client of the engine. It connects lazily, reconnects after the engine restarts,
 * and fails the requests in flight on a lost connection with `engine_unavailable` (their
 * outcome is unknown to the caller, so they were never acknowledged to a client).
 */
export class EngineClient {
  private socket: Socket | undefined;
  private writer: FrameWriter | undefined;
  private connecting: Promise<Socket> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;
  /** Cleared by `stopWaiting`: a lost engine is tried once, not until the timeout. */
  private waitsForEngine = true;
  private readonly connectedListeners: Array<() => void> = [];
  private readonly pushHandlers = new Map<string, (args: unknown) => void>();

  /** Fails the calls whose engine went silent past their deadline (see `call`). */
  private sweeper: NodeJS.Timeout | undefined;
  /** Whether to connect again at once after a lost connection (`reconnectWhile`). */
  private reconnectWanted: (() => boolean) | undefined;
  private reconnecting: NodeJS.Timeout | undefined;

  /**
   * @param callTimeoutMs how long a call waits for its answer: an engine stopped or stuck
   *   (SIGSTOP, a disk that hangs) must not hold a client's request without bound. The call then
   *   fails with `engine_unavailable` (503 with Retry-After), and the engine refuses the command
   *   if it reaches it only after the deadline. A write that timed out may still have committed
   *   just before: like a lost connection, its outcome is unknown to the caller, and it was
   *   never acknowledged to a client.
   */
  constructor(
    private readonly socketPath: string,
    private readonly connectTimeoutMs = 10_000,
    private readonly callTimeoutMs = CALL_TIMEOUT_MS,
  ) {}

  /**
   * For a process that is stopping: from now on a call made while disconnected tries to connect
   * once and fails at once with `engine_unavailable`, instead of waiting up to the connect
   * timeout for an engine that may be stopping too (processes started on their own are often
   * stopped together). Calls on a live connection are unaffected.
   */
  stopWaiting(): void {
    this.waitsForEngine = false;
  }

  /** Whether a connection to the engine is open now (readiness; a call reconnects anyway). */
  get connected(): boolean {
    return this.socket !== undefined && !this.socket.destroyed;
  }

  /**
   * Runs `listener` after every new connection to the engine, the first included: state the
   * engine keeps per connection (upload pins) must be sent again after a reconnect.
   */
  onConnected(listener: () => void): void {
    this.connectedListeners.push(listener);
  }

  /**
   * After a lost connection, connects again at once (and on, until it can) while `wanted()`
   * answers true, rather than at the next call: a segment writer must register its open
   * segment with a restarted engine before commits into it go on (segment-syncer.ts), and the
   * commits come on other connections.
   */
  reconnectWhile(wanted: () => boolean): void {
    this.reconnectWanted = wanted;
  }

  private reconnectSoon(): void {
    // A process that is stopping (`stopWaiting`) does not hold on to a lost engine.
    if (this.reconnecting || this.closed || !this.waitsForEngine || !this.reconnectWanted?.())
      return;
    this.reconnecting = setTimeout(() => {
      this.reconnecting = undefined;
      if (this.socket || this.closed || !this.reconnectWanted?.()) return;
      this.connect().catch(() => this.reconnectSoon());
    }, RECONNECT_DELAY_MS);
    this.reconnecting.unref();
  }

  /** Runs `handler` with the arguments of every push frame named `name` (one handler a name). */
  onPush(name: string, handler: (args: unknown) => void): void {
    if (this.pushHandlers.has(name)) throw new TypeError(`a handler of ${name} is already set`);
    this.pushHandlers.set(name, handler);
  }

  /** Sends command `op` and answers its result (commands.ts types both by the command's name). */
  call<K extends CommandName>(op: K, args: CommandArgs<K>): Promise<CommandResult<K>> {
    return this.send(op, args) as Promise<CommandResult<K>>;
  }

  /**
   * Sends a command without the map's types: only for a name known at run time (a command
   * relayed from elsewhere; docs/architecture.md, "Engine commands are typed"). The arguments
   * and the result are the caller's to check.
   */
  callUnchecked(op: string, args: unknown): Promise<unknown> {
    return this.send(op, args);
  }

  private async send(op: string, args: unknown): Promise<unknown> {
    const socket = this.socket ?? (await this.connect());
    const writer = this.writer;
    if (socket.destroyed || socket !== this.socket || !writer)
      throw EngineUnavailable('lost the connection to the engine');
    const id = this.nextId++;
    const long = LONG_COMMANDS.has(op);
    const deadline = long ? undefined : Date.now() + this.callTimeoutMs;
    const giveUpAt = deadline === undefined ? Infinity : deadline + GIVE_UP_GRACE_MS;
    const result = new Promise<unknown>((resolve, reject) =>
      this.pending.set(id, { resolve, reject, giveUpAt }),
    );
    if (!long) this.sweep();
    writer.write(
      encodeFrame(
        deadline === undefined ? { i: id, o: op, a: args } : { i: id, o: op, a: args, d: deadline },
      ),
    );
    return result;
  }

  /**
   * One timer for every call in flight, not one a call: it runs while calls wait and fails
   * those past their give-up time. Calls are in the map in the order they were made, and all
   * have one timeout, so the scan stops at the first that may still wait (long commands,
   * which never give up, are skipped).
   */
  private sweep(): void {
    if (this.sweeper) return;
    const tick = Math.max(100, Math.min(1000, this.callTimeoutMs / 4));
    this.sweeper = setInterval(() => {
      const now = Date.now();
      let waiting = false;
      for (const [id, request] of this.pending) {
        if (request.giveUpAt === Infinity) continue;
        if (request.giveUpAt > now) {
          waiting = true;
          break;
        }
        this.pending.delete(id);
        request.reject(
          EngineUnavailable(`the engine did not answer within ${this.callTimeoutMs} ms`, {
            retryAfterSeconds: 1,
          }),
        );
      }
      if (!waiting && this.sweeper) {
        clearInterval(this.sweeper);
        this.sweeper = undefined;
      }
    }, tick);
    this.sweeper.unref();
  }

  /**
   * The first call of a process that needs the engine: answers once the engine does, and says
   * so in the log while it waits (the engine may be started after this process), up to the
   * client's connect timeout.
   */
  async waitForEngine(log: { info(fields: object, message: string): void }): Promise<void> {
    const notice = setTimeout(
      () => log.info({ socket: this.socketPath }, 'waiting for the engine'),
      WAIT_NOTICE_MS,
    );
    try {
      await this.call('ping', {});
    } finally {
      clearTimeout(notice);
    }
  }

  private connect(): Promise<Socket> {
    this.connecting ??= this.connectWithRetry().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connectWithRetry(): Promise<Socket> {
    const started = Date.now();
    for (let delayMs = 20; ; delayMs = Math.min(delayMs * 2, 500)) {
      if (this.closed) throw EngineUnavailable('engine client closed');
      try {
        const socket = await this.tryConnect();
        this.attach(socket);
        return socket;
      } catch (error) {
        // Read at each try: `stopWaiting` also ends a wait that began before it.
        const deadline = started + (this.waitsForEngine ? this.connectTimeoutMs : 0);
        if (Date.now() + delayMs > deadline) {
          throw EngineUnavailable(
            `engine socket ${this.socketPath} not reachable`,
            {},
            { cause: error },
          );
        }
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    }
  }

  private tryConnect(): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(this.socketPath);
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(socket);
      });
      socket.once('error', reject);
    });
  }

  private attach(socket: Socket): void {
    const decoder = new FrameDecoder();
    socket.setNoDelay(true);
    socket.on('data', (data: Buffer) => {
      let messages: unknown[];
      try {
        messages = decoder.push(data);
      } catch {
        // A stream we cannot parse is not a stream we can trust: drop it (requests fail).
        socket.destroy();
        return;
      }
      // A push handler that throws is a bug: it is thrown again once the responses read with it
      // are settled, so that their callers are not left waiting.
      let failure: { error: unknown } | undefined;
      for (const message of messages) {
        if (!isPush(message)) this.settle(message as Response);
        else
          try {
            this.pushHandlers.get(message.p)?.(message.a);
          } catch (error) {
            failure ??= { error };
          }
      }
      if (failure) throw failure.error;
    });
    const lost = (): void => {
      if (this.socket === socket) this.socket = undefined;
      const failed = [...this.pending.values()];
      this.pending.clear();
      for (const request of failed)
        request.reject(EngineUnavailable('lost the connection to the engine'));
      this.reconnectSoon();
    };
    socket.on('error', lost);
    socket.on('close', lost);
    this.socket = socket;
    this.writer = new FrameWriter(socket);
    for (const listener of this.connectedListeners) listener();
  }

  private settle(response: Response): void {
    const request = this.pending.get(response.i);
    if (!request) return;
    this.pending.delete(response.i);
    if (response.e) request.reject(fromWire(response.e));
    else request.resolve(response.r);
  }

  close(): void {
    this.closed = true;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
    if (this.reconnecting) clearTimeout(this.reconnecting);
    this.reconnecting = undefined;
    this.socket?.destroy();
    this.socket = undefined;
  }
}
