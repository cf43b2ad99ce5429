// `lightwell admin-token create|list|revoke`: admin tokens are minted only offline, by whoever
// can write the data directory. When the engine runs, the change goes through it (the single
// writer); otherwise this command takes the engine lock and writes the index itself.
//
// Only `create` creates the data directory; `list` and `revoke` refuse a path that holds none.
//
// Output (DECISIONS.md): `create` prints the token alone on the last line of stdout, or with
// `--json` one object `{token, tokenId, role, tenant, expiresAt}` (tenant and expiresAt null when
// absent). `list --json` prints `{tokens: [{tokenId, role, tenant, name, state, createdAt,
// expiresAt, revokedAt}]}` with RFC 3339 times and state active|revoked|expired; never a hash.
// A token is valid only until `--expires` (a duration such as 30d, or an RFC 3339 time) and
// only for `--tenant` when given; the admin API answers 401 once it is revoked or expired.

import {
  dataDirPaths,
  isDataDir,
  prepareDataDir,
  newStoreNotice,
  engineLockOwner,
  acquireEngineLock,
  type DataDirPaths,
} from '../engine/data-dir.js';
import { EngineClient } from '../engine/protocol.js';
import { IndexStore } from '../engine/index/store.js';
import { DB, type AdminTokenRecord, type AdminRole } from '../engine/index/schema.js';
import * as control from '../engine/ops/control.js';
import { publishAdminToken } from '../cluster/control-mirror.js';
import type { EngineContext } from '../engine/ops/context.js';
import { newAdminToken, ADMIN_TOKEN_PREFIX } from '../security/access-keys.js';
import { parseAdminExpires } from '../security/expiry.js';
import { refuseControlChars, validateTenantId } from '../security/names.js';
import {
  parseArgs,
  settingsFrom,
  failureText,
  isUsageError,
  UsageError,
  EXIT_FAILURE,
  EXIT_USAGE,
  versionText,
  type CommandSpec,
} from './args.js';
import { BadRequest, NotFound } from '../util/errors.js';

const roles: readonly AdminRole[] = ['viewer', 'operator', 'owner'];
/** The longest `--name`: a label for people reading `list`. */
const TOKEN_NAME_CHARS_MAX = 256;

const USAGE =
  'usage: lightwell admin-token create --role viewer|operator|owner [--tenant ID] [--expires 30d|RFC3339] [--name TEXT] [--json] | list [--json] | revoke ID [--json]\n' +
  '  (with --data-dir DIR, default ./data, and --config FILE like lightwell serve)';

const USAGE_HINT = ' (lightwell admin-token --help shows the usage)';

/** The positional arguments each action takes after its name. */
const ARITY: Readonly<Record<string, number>> = { create: 0, list: 0, revoke: 1 };

const CREATE_OPTIONS: ReadonlySet<string> = new Set(['role', 'tenant', 'expires', 'name']);

const COMMAND: CommandSpec = {
  options: CREATE_OPTIONS,
  flags: new Set(['json']),
  positional: true,
};

/**
 * Sets the exit code: EXIT_USAGE for a command line it does not take (the usage, or the
 * reason and a pointer to it, on stderr), EXIT_FAILURE when the action fails.
 */
export async function adminToken(argv: readonly string[]): Promise<void> {
  try {
    const args = parseArgs(argv, COMMAND);
    if (args.flags.has('help')) {
      process.stdout.write(`${USAGE}\n`);
      return;
    }
    if (args.flags.has('version')) {
      process.stdout.write(versionText('lightwell'));
      return;
    }
    const [action = '', ...rest] = args.positional;
    if (ARITY[action] !== rest.length) throw UsageError(USAGE);
    const createOnly = [...CREATE_OPTIONS].find((name) => args.options.has(name));
    if (action !== 'create' && createOnly !== undefined)
      throw UsageError(`--${createOnly} is an option of admin-token create only`);
    const settings = settingsFrom(args, COMMAND);
    const minted = action === 'create' ? mint(args.options) : undefined;
    const paths = dataDirPaths(settings.string('data_dir'));
    // Only create may make a data directory (DECISIONS.md); list and revoke would answer from an
    // empty one as if there were no tokens.
    if (minted === undefined && !isDataDir(paths))
      throw NotFound(`no Lightwell data directory at ${paths.root}`);
    if ((await prepareDataDir(paths)).created)
      process.stderr.write(`lightwell admin-token: ${newStoreNotice(paths)}\n`);
    const json = args.flags.has('json');
    if (minted !== undefined) await create(paths, minted, json);
    else if (action === 'list') await list(paths, json);
    else await revoke(paths, rest[0] as string, json);
  } catch (error) {
    const usage = isUsageError(error);
    const hint = usage && !failureText(error).startsWith('usage:') ? USAGE_HINT : '';
    // One line, never a stack: an unexpected error's first line names it.
    const text = failureText(error).split('\n')[0] ?? '';
    process.stderr.write(`lightwell admin-token: ${text}${hint}\n`);
    process.exitCode = usage ? EXIT_USAGE : EXIT_FAILURE;
  }
}

const OUTBOX_NOTICE =
  'lightwell admin-token: the cluster is not reachable from here; the change is made on this ' +
  'node and published to the cluster when this member starts\n';

interface Minted {
  readonly token: string;
  readonly record: AdminTokenRecord;
}

/** The new token from `create`'s options, checked before anything is written. */
function mint(options: Map<string, string>): Minted {
  const role = options.get('role') as AdminRole | undefined;
  if (!role || !roles.includes(role)) throw UsageError('--role must be viewer, operator or owner');
  const tenant = options.get('tenant');
  if (tenant !== undefined) validateTenantId(tenant);
  const expires = options.get('expires');
  const minted = newAdminToken();
  const record: AdminTokenRecord = {
    tokenId: minted.tokenId,
    hash: minted.hash,
    role,
    createdAt: Date.now(),
  };
  if (tenant !== undefined) record.tenant = tenant;
  if (expires !== undefined) record.expiresAt = parseAdminExpires(expires, Date.now());
  const name = options.get('name');
  if (name !== undefined) {
    // `list` prints it in a tab-separated row: a tab or line break in it would forge rows.
    refuseControlChars(name, '--name');
    if (name.length > TOKEN_NAME_CHARS_MAX)
      throw BadRequest(`--name must be at most ${TOKEN_NAME_CHARS_MAX} characters`);
    record.name = name;
  }
  return { token: minted.token, record };
}

async function create(paths: DataDirPaths, minted: Minted, json: boolean): Promise<void> {
  const { record } = minted;
  const { role, tenant } = record;
  // A cluster member's token is cluster-wide: etcd first; a stopped member (its etcd member
  // down too) keeps it in an outbox that the member publishes when it starts.
  const published = await publishAdminToken(paths.root, record);
  if (published === 'outbox') process.stderr.write(OUTBOX_NOTICE);
  await withIndex(
    paths,
    async (engine) => engine.call('putAdminToken', { record }),
    (context) => control.putAdminToken(context, { record }),
  );
  const expiresAt =
    record.expiresAt === undefined ? null : new Date(record.expiresAt).toISOString();
  if (json)
    process.stdout.write(
      `${JSON.stringify({ token: minted.token, tokenId: record.tokenId, role, tenant: tenant ?? null, expiresAt })}\n`,
    );
  else {
    process.stdout.write(
      `admin token ${record.tokenId} (role ${role}${tenant ? `, tenant ${tenant}` : ''}${expiresAt ? `, expires ${expiresAt}` : ''}); it is shown only once:\n`,
    );
    process.stdout.write(`${minted.token}\n`);
  }
}

async function list(paths: DataDirPaths, json: boolean): Promise<void> {
  const tokens = (
    await withIndex(
      paths,
      async () => readTokensReadOnly(paths),
      (context) => readTokens(context.store),
    )
  ).map(tokenJson);
  if (json) {
    process.stdout.write(`${JSON.stringify({ tokens })}\n`);
    return;
  }
  process.stdout.write('TOKEN ID\tROLE\tTENANT\tSTATE\tEXPIRES\tNAME\n');
  for (const token of tokens) {
    process.stdout.write(
      `${token.tokenId}\t${token.role}\t${token.tenant ?? '*'}\t${token.state}\t${token.expiresAt ?? 'never'}\t${token.name ?? ''}\n`,
    );
  }
}

const isoOrNull = (ms: number | undefined): string | null =>
  ms === undefined ? null : new Date(ms).toISOString();

interface TokenView {
  tokenId: string;
  role: AdminRole;
  tenant: string | null;
  name: string | null;
  state: 'active' | 'revoked' | 'expired';
  createdAt: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
}

function tokenJson(token: Omit<AdminTokenRecord, 'hash'>): TokenView {
  const expired = token.expiresAt !== undefined && token.expiresAt <= Date.now();
  return {
    tokenId: token.tokenId,
    role: token.role,
    tenant: token.tenant ?? null,
    name: token.name ?? null,
    state: token.revokedAt !== undefined ? 'revoked' : expired ? 'expired' : 'active',
    createdAt: isoOrNull(token.createdAt),
    expiresAt: isoOrNull(token.expiresAt),
    revokedAt: isoOrNull(token.revokedAt),
  };
}

/** With the engine running: a read-only view of the index (the engine is its only writer). */
async function readTokensReadOnly(
  paths: DataDirPaths,
): Promise<Array<Omit<AdminTokenRecord, 'hash'>>> {
  const store = IndexStore.open({ path: paths.index, readOnly: true });
  try {
    return readTokens(store);
  } finally {
    await store.close();
  }
}

/**
 * Every token without its hash. Offline this runs on the store `withIndex` opened (one
 * environment per process).
 */
function readTokens(store: IndexStore): Array<Omit<AdminTokenRecord, 'hash'>> {
  return [...store.range<AdminTokenRecord>(DB.adminTokens, {})].map(({ value }) => {
    const { hash: _hash, ...rest } = value;
    return rest;
  });
}

async function revoke(paths: DataDirPaths, tokenId: string, json: boolean): Promise<void> {
  // A token pasted where its id belongs is refused without being echoed: the message would put
  // the secret in terminal scrollback and CI logs.
  if (tokenId.startsWith(ADMIN_TOKEN_PREFIX))
    throw UsageError(
      'that is a token, not a token id: revoke takes the id (adm_…) that admin-token list shows',
    );
  const record = await withIndex(
    paths,
    async (engine) => engine.call('revokeAdminToken', { tokenId }),
    (context) => control.revokeAdminToken(context, { tokenId }),
  );
  if ((await publishAdminToken(paths.root, record)) === 'outbox')
    process.stderr.write(OUTBOX_NOTICE);
  const { hash: _hash, ...rest } = record;
  if (json) process.stdout.write(`${JSON.stringify(tokenJson(rest))}\n`);
  else process.stdout.write(`revoked ${tokenId}\n`);
}

/** Through the running engine, or directly under the engine lock when none runs. */
async function withIndex<T>(
  paths: DataDirPaths,
  viaEngine: (engine: EngineClient) => Promise<T>,
  offline: (context: EngineContext) => T,
): Promise<T> {
  if (engineLockOwner(paths) !== undefined) {
    const engine = new EngineClient(paths.socket, 5000);
    try {
      return await viaEngine(engine);
    } finally {
      engine.close();
    }
  }
  const release = await acquireEngineLock(paths);
  const store = IndexStore.open({ path: paths.index, readOnly: false });
  try {
    const context: EngineContext = {
      store,
      masterKey: Buffer.alloc(0),
      settings: undefined as never,
      now: () => Date.now(),
    };
    return store.transactSync(() => offline(context));
  } finally {
    await store.close();
    await release();
  }
}
