// The engine's command map: every command name with the arguments it takes and the result it
// answers, read off the engine's own tables (engine.ts `operations`, `readOperations`,
// `connectionCommands`). `EngineClient.call` is typed by it, so a renamed command or a mistyped
// field fails to compile on the caller's side as on the engine's. Type-only: the engine's code is
// never loaded by a client for it.

import type { connectionCommands, operations, readOperations } from './engine.js';
import type { AuditInput } from './ops/audit.js';
import type { WireError } from '../util/errors.js';

type Transactional = typeof operations;
type Reads = typeof readOperations;
type PerConnection = typeof connectionCommands;

/** The second parameter of an operation `(context, args)`; none is `Record<string, never>`. */
type ArgsOf<F> = F extends (context: never, args: infer A) => unknown
  ? unknown extends A
    ? Record<string, never>
    : A
  : never;

/** The last parameter of a connection command `(executor, socket, writer, args)`. */
type ConnectionArgsOf<F> = F extends (e: never, s: never, w: never, args: infer A) => unknown
  ? A
  : never;

/**
 * What every transactional command may carry besides its own arguments: the audit row of the
 * request it serves (committed with it) and the access key that asks (checked live at commit).
 */
export interface CommandExtras {
  audit?: AuditInput;
  caller?: string;
}

/** A transactional command's arguments, with the extras it may carry. */
type TransactionalArgs<K extends keyof Transactional> = ArgsOf<Transactional[K]> & CommandExtras;

/**
 * Commands the engine runs before its dispatcher, outside the three tables: `putObjects`
 * (protocol.ts `PUT_GROUP_COMMAND`, engine.ts `runPutGroup`) is several whole `putObject`
 * commands sent as one, answered with one result or one error per item, in order.
 */
interface Grouped {
  putObjects: {
    /** `packed`: the items in the compact encoding of put-group-codec.ts. */
    args: { items: TransactionalArgs<'putObject'>[] } | { packed: Uint8Array };
    result: Array<{ r: Awaited<ReturnType<Transactional['putObject']>> } | { e: WireError }>;
  };
}

export type EngineCommands = {
  [K in keyof Transactional]: {
    args: TransactionalArgs<K>;
    result: Awaited<ReturnType<Transactional[K]>>;
  };
} & {
  [K in keyof Reads]: { args: ArgsOf<Reads[K]>; result: Awaited<ReturnType<Reads[K]>> };
} & {
  [K in keyof PerConnection]: {
    args: ConnectionArgsOf<PerConnection[K]>;
    result: Awaited<ReturnType<PerConnection[K]>>;
  };
} & Grouped;

export type CommandName = Extract<keyof EngineCommands, string>;
/** The commands that commit in a write transaction, and so may carry an audit row. */
export type TransactionalName = Extract<keyof Transactional, string>;
export type CommandArgs<K extends CommandName> = EngineCommands[K]['args'];
export type CommandResult<K extends CommandName> = EngineCommands[K]['result'];
