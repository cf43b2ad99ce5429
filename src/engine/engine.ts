// The engine process: the single writer of the index.
//
// It owns the data directory (engine.lock), opens LMDB read-write, recovers segments left open
// by dead writers, and serves commands on `engine.sock`. Every command runs as its own child
// transaction inside lmdb-js's batched write transaction, so all commands that arrive in one
// event turn share one durable commit (group commit) while each stays atomic on its own. The
// answer to a command is sent only after its commit is on disk.

import { createServer, type Server, type Socket } from 'node:net';
import { unlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { IndexStore } from './index/store.js';
import { dataDirPaths, prepareDataDir, acquireEngineLock, loadMasterKey, type DataDirPaths } from './data-dir.js';
import { FrameDecoder, encodeFrame, type Request } from './protocol.js';
import { toWire, isLightwellError, MethodNotAllowed } from '../util/errors.js';
import { componentLogger } from '../util/log.js';
import type { Settings } from '../util/config.js';
import type { EngineContext } from './ops/context.js';
import * as control from './ops/control.js';
import * as objects from './ops/objects.js';
import * as segments from './ops/segments.js';
import * as audit from './ops/audit.js';
import { recoverSegments } from './segments/recovery.js';
import { Compactor } from './segments/compaction.js';

type Op = (context: EngineContext, args: never) => unknown;

/** Every command the engine accepts. Each runs inside one durable transaction. */
export const operations: Readonly<Record<string, Op>> = {
  ping: () => ({ ok: true }),
  createTenant: control.createTenant,
  createAccount: control.createAccount,
  createAccessKey: control.createAccessKey,
  putAdminToken: control.putAdminToken,
  revokeAdminToken: control.revokeAdminToken,
  createBucket: objects.createBucket,
  deleteBucket: objects.deleteBucket,
  putObject: objects.putObject,
  deleteObject: objects.deleteObject,
  allocSegment: segments.allocSegment,
  sealSegment: segments.sealSegment,
  appendAudit: audit.appendAudit,
};

export interface RunningEngine {
  readonly paths: DataDirPaths;
  readonly store: IndexStore;
  stop(): Promise<void>;
}

export async function startEngine(options: { dataDir: string; settings: Settings }): Promise<RunningEngine> {
  const log = componentLogger('engine');
  const paths = dataDirPaths(options.dataDir);
  await prepareDataDir(paths);
  const releaseLock = await acquireEngineLock(paths);
  const masterKey = await loadMasterKey(paths);
  const store = IndexStore.open({ path: paths.index, readOnly: false });
  const context: EngineContext = { store, masterKey, settings: options.settings, now: () => Date.now() };
  await recoverSegments({ paths, store, log: componentLogger('engine.recovery') });
  const compactor = new Compactor({ paths, store, settings: options.settings, log: componentLogger('engine.compaction') });
  const sockets = new Set<Socket>();
  const server = createServer((socket) => serveConnection(socket, context, sockets));
  if (existsSync(paths.socket)) await unlink(paths.socket);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(paths.socket, () => resolve());
  });
  compactor.start();
  log.info({ dataDir: paths.root }, 'engine ready');
  return {
    paths,
    store,
    stop: async () => {
      await compactor.stop();
      await closeServer(server, sockets);
      await store.close();
      await unlink(paths.socket).catch(() => undefined);
      await releaseLock();
      log.info('engine stopped');
    },
  };
}

function serveConnection(socket: Socket, context: EngineContext, sockets: Set<Socket>): void {
  const log = componentLogger('engine.commands');
  const decoder = new FrameDecoder();
  sockets.add(socket);
  socket.setNoDelay(true);
  socket.on('close', () => sockets.delete(socket));
  socket.on('error', () => socket.destroy());
  socket.on('data', (data: Buffer) => {
    let requests: unknown[];
    try {
      requests = decoder.push(data);
    } catch (error) {
      log.warn({ err: error }, 'malformed command stream; closing the connection');
      socket.destroy();
      return;
    }
    for (const request of requests) void execute(request as Request, context, socket, log);
  });
}

async function execute(request: Request, context: EngineContext, socket: Socket, log: ReturnType<typeof componentLogger>): Promise<void> {
  const op = Object.hasOwn(operations, request.o) ? operations[request.o] : undefined;
  let frame: Buffer;
  try {
    if (!op) throw MethodNotAllowed(`unknown engine command ${String(request.o)}`);
    // A command may carry the audit row of the request it serves; it commits with the change.
    const args = request.a as { audit?: audit.AuditInput } | undefined;
    const result = await context.store.transact(() => {
      const value = op(context, request.a as never);
      if (args?.audit) audit.writeAudit(context, args.audit);
      return value;
    });
    frame = encodeFrame({ i: request.i, r: result ?? null });
  } catch (error) {
    if (!isLightwellError(error)) log.error({ err: error, op: request.o }, 'engine command failed');
    frame = encodeFrame({ i: request.i, e: toWire(error) });
  }
  if (!socket.destroyed) socket.write(frame);
}

async function closeServer(server: Server, sockets: Set<Socket>): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  for (const socket of sockets) socket.end();
  const timer = setTimeout(() => {
    for (const socket of sockets) socket.destroy();
  }, 2000);
  await closed;
  clearTimeout(timer);
}
