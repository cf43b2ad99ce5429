// The engine's command map: every command name with the arguments it takes and the result it
// answers, read off the engine's own tables (engine.ts `operations`, `readOperations`,
// `connectionCommands`). `EngineClient.call` is typed by it, so a renamed command or a mistyped
// field fails to compile on the caller's side as on the engine's. Type-only: the engine's code is
// never loaded by a client for it.

import type { connectionCommands, operations, readOperations } from './engine.js';
import type { AuditInput } from './ops/audit.js';

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

export type EngineCommands = {
  [K in keyof Transactional]: {
    args: ArgsOf<Transactional[K]> & CommandExtras;
    result: Awaited<ReturnType<Transactional[K]>>;
  };
} & {
  [K in keyof Reads]: { args: ArgsOf<Reads[K]>; result: Awaited<ReturnType<Reads[K]>> };
} & {
  [K in keyof PerConnection]: {
    args: ConnectionArgsOf<PerConnection[K]>;
    result: Awaited<ReturnType<PerConnection[K]>>;
  };
};

export type CommandName = Extract<keyof EngineCommands, string>;
export type CommandArgs<K extends CommandName> = EngineCommands[K]['args'];
export type CommandResult<K extends CommandName> = EngineCommands[K]['result'];
