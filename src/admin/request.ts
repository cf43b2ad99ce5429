// What every admin handler shares: the services, body and field parsing with clear 400s, the
// `?dryRun=true` switch, and `mutate`, which sends a command to the engine together with the
// request's audit row so that the row commits in the same transaction as the change.

import type { Exchange } from '../http/exchange.js';
import { auditRowOf, type AuditSink } from '../http/audit.js';
import type { IndexStore } from '../engine/index/store.js';
import type { EngineClient } from '../engine/protocol.js';
import type {
  CommandArgs,
  CommandExtras,
  CommandResult,
  TransactionalName,
} from '../engine/commands.js';
import type { NodeRecord } from '../engine/index/schema.js';
import type { Settings } from '../util/config.js';
import { BadRequest } from '../util/errors.js';
import { NO_CONTROL_CHARS_PATTERN, refuseControlChars } from '../security/names.js';
import type { AdminAuth } from './auth.js';
import { zeroPlanCounts } from './plan.js';

export interface AdminServices {
  readonly store: IndexStore;
  readonly engine: EngineClient;
  readonly settings: Settings;
  readonly auth: AdminAuth;
  /** The listener's audit sink: the audit query settles it before reading. */
  readonly audit: AuditSink;
  readonly node: NodeRecord;
  /** HOST:PORT of the admin listener (the bound port, once it listens): this node's address. */
  readonly address: () => string;
  /** Registers work to stop when the admin process closes (timers that retry, say). */
  readonly onClose?: (stop: () => void) => void;
}

/** Longest free-text field accepted (names, external references). */
export const TEXT_CHARS_MAX = 1024;

export type Body = Record<string, unknown>;

/** A name, reason or external reference as the documents publish it: no control characters. */
export const textSchema = { type: 'string', pattern: NO_CONTROL_CHARS_PATTERN } as const;
/** `reason`, optional or required, on every mutation. */
export const reasonSchema = { ...textSchema, description: 'noted in the audit log' } as const;

/** The JSON object body; an empty body is `{}`. */
export async function readBody(exchange: Exchange): Promise<Body> {
  const value = await exchange.readJson();
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest('the body must be a JSON object');
  return value as Body;
}

/** An optional text field; `null` is not its absence (strict-input.ts), so it is a 400. */
export function optionalString(body: Body, field: string): string | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > TEXT_CHARS_MAX)
    throw BadRequest(`${field} must be a string of at most ${TEXT_CHARS_MAX} characters`);
  return value;
}

/** An optional name or external reference: text without control characters (names.ts). */
export function optionalText(body: Body, field: string): string | undefined {
  const value = optionalString(body, field);
  if (value !== undefined) refuseControlChars(value, field);
  return value;
}

export function requiredString(body: Body, field: string, hint = ''): string {
  const value = optionalString(body, field);
  if (value === undefined || value.trim().length === 0)
    throw BadRequest(`${field} is required${hint}`);
  return value;
}

export function optionalBoolean(body: Body, field: string): boolean | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw BadRequest(`${field} must be true or false`);
  return value;
}

/** `reason` (required on disable, delete, revoke and the cluster operations); noted for audit. */
export function requiredReason(exchange: Exchange, body: Body): string {
  const reason = requiredString(body, 'reason', ' (say why, for the audit log)');
  refuseControlChars(reason, 'reason');
  exchange.audit.reason = reason;
  return reason;
}

/** An optional `reason`, accepted by every admin mutation and noted for audit. */
export function optionalReason(exchange: Exchange, body: Body): string | undefined {
  const reason = optionalText(body, 'reason');
  if (reason !== undefined) exchange.audit.reason = reason;
  return reason;
}

/** `confirm` (or another confirmation field) must repeat `expected` exactly. */
export function requireConfirm(body: Body, field: string, expected: string): void {
  const value = body[field];
  if (value !== expected) throw BadRequest(`${field} must equal ${JSON.stringify(expected)}`);
}

/**
 * A boolean query parameter: `true`, `1` or present without a value; `false`, `0` or absent;
 * in any case (`True`, as Python's clients send it).
 */
export function booleanQuery(exchange: Exchange, name: string): boolean {
  const value = exchange.query.get(name)?.toLowerCase();
  if (value === undefined || value === 'false' || value === '0') return false;
  if (value !== 'true' && value !== '1' && value !== '')
    throw BadRequest(`${name} must be true or false (1 and 0, or no value for true, are read too)`);
  return true;
}

/** `?dryRun=true` (see booleanQuery); anything else but false or absent is a 400. Marks the audit row. */
export function isDryRun(exchange: Exchange): boolean {
  const dryRun = booleanQuery(exchange, 'dryRun');
  if (dryRun) exchange.audit.dryRun = true;
  return dryRun;
}

/**
 * Sends a mutation with its audit row, which then commits in the same transaction: a typed
 * engine command (engine/commands.ts), so a renamed command or a mistyped field fails to
 * compile here as it does in the engine. Fields left undefined are not sent (the engine reads
 * an absent field, not an undefined one, as "not given").
 */
export async function mutate<K extends TransactionalName>(
  services: AdminServices,
  exchange: Exchange,
  op: K,
  args: MutationArgs<K>,
  status: number,
): Promise<CommandResult<K>> {
  const sent = definedFields(args) as CommandArgs<K>;
  (sent as CommandExtras).audit = auditRowOf(exchange, status);
  const result = await services.engine.call(op, sent);
  exchange.audit.written = true;
  return result;
}

/**
 * A command's arguments as the admin handlers build them: each optional field may also be
 * `undefined` (an optional body field not given), which `mutate` leaves out.
 */
export type MutationArgs<K extends TransactionalName> = {
  [F in keyof CommandArgs<K>]:
    CommandArgs<K>[F] | (undefined extends CommandArgs<K>[F] ? undefined : never);
};

/** A copy of `args` without its undefined fields. */
function definedFields(args: object): Record<string, unknown> {
  const defined: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(args))
    if (value !== undefined) defined[field] = value;
  return defined;
}

/**
 * The answer of a dry run of a simple mutation: the eight counts of DECISIONS.md's plan (zero
 * unless `counts` says otherwise), with what it creates or changes by kind (`tenants`, ...).
 */
export function dryRunAnswer(
  action: string,
  target: string,
  result: unknown,
  counts: Readonly<Record<string, number>>,
): Record<string, unknown> {
  return {
    dryRun: true,
    applied: false,
    action,
    target,
    counts: { ...zeroPlanCounts(), ...counts },
    blockers: [],
    result,
  };
}

export const dryRunQuery = {
  dryRun: { type: 'boolean', description: 'return the plan and apply nothing' },
} as const;
