// Command-line parsing shared by every binary: `--flag value`, `--flag=value`, yes/no flags,
// and settings by their dotted names (`--security.native_api_token_ttl 2h`). `--help` and `-h`
// are the `help` flag: every binary then prints its usage and exits 0 without starting;
// `--version` prints the release (`versionText`) and exits 0 likewise.
//
// Anything a command does not take is refused, never ignored: an unknown option or flag, a
// single-dash argument other than `-h`, a word where the command takes none. Such a usage error
// exits with EXIT_USAGE (2), as an unknown command does; a command that was understood but
// cannot be carried out (a bad setting value, a port taken) exits with EXIT_FAILURE (1).

import assert from 'node:assert';
import { isSettingName, loadSettings, settingSpecs, type Settings } from '../util/config.js';
import { RELEASE } from '../engine/data-dir.js';
import { FORMAT_VERSION } from '../format/marker.js';
import { BadRequest, isLightwellError, type LightwellError } from '../util/errors.js';

export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

export interface ParsedArgs {
  readonly positional: string[];
  readonly options: Map<string, string>;
  readonly flags: Set<string>;
}

/** What a command takes besides the settings, `--config` and `--help`. */
export interface CommandSpec {
  /** Options that take a value, e.g. `role` for `--role owner`. */
  readonly options?: ReadonlySet<string>;
  /** Yes/no flags, e.g. `json`. */
  readonly flags?: ReadonlySet<string>;
  /** Whether words that are not options (an action, an id) are taken. */
  readonly positional?: boolean;
}

/** Flag spellings of the settings a user sets most (DECISIONS.md). */
const settingAliases: Record<string, string> = {
  'data-dir': 'data_dir',
  'public-listen': 'public_listen',
  'admin-listen': 'admin_listen',
  gateways: 'gateways',
  workers: 'workers',
  'gateway-threads': 'gateway_threads',
  'log-level': 'log.level',
};

/** A command line that does not fit the command: exits EXIT_USAGE. */
export function UsageError(message: string): LightwellError {
  return BadRequest(message, { usage: true });
}

export function isUsageError(error: unknown): boolean {
  return isLightwellError(error) && error.details['usage'] === true;
}

/**
 * The reason a command failed, in one line when it is an operating error: a LightwellError's
 * message, or an errno error's (`EACCES: permission denied, open '…'`). Anything else is a bug,
 * and its stack is what a report needs.
 */
export function failureText(error: unknown): string {
  if (isLightwellError(error)) return error.message;
  const errno = error as Partial<NodeJS.ErrnoException> | undefined;
  if (typeof errno?.code === 'string' && typeof errno.syscall === 'string')
    return errno.message ?? errno.code;
  return (error as Error | undefined)?.stack ?? String(error);
}

export function parseArgs(argv: readonly string[], spec: CommandSpec = {}): ParsedArgs {
  const positional: string[] = [];
  const options = new Map<string, string>();
  const flags = new Set<string>();
  const takesValue = (name: string): boolean =>
    name === 'config' ||
    spec.options?.has(name) === true ||
    isSettingName(settingAliases[name] ?? name);
  const takesFlag = (name: string): boolean =>
    name === 'help' || name === 'version' || spec.flags?.has(name) === true;
  for (let index = 0; index < argv.length; index += 1) {
    const arg = argv[index] as string;
    if (arg === '-h') {
      flags.add('help');
      continue;
    }
    if (!arg.startsWith('-')) {
      if (spec.positional !== true) throw UsageError(`unexpected argument ${arg}`);
      positional.push(arg);
      continue;
    }
    if (!arg.startsWith('--') || arg === '--') throw UsageError(`unknown option ${arg}`);
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    if (takesFlag(name)) {
      if (eq >= 0) throw UsageError(`--${name} takes no value`);
      flags.add(name);
      continue;
    }
    if (!takesValue(name)) throw UsageError(`unknown option --${name}`);
    if (eq >= 0) {
      options.set(name, arg.slice(eq + 1));
      continue;
    }
    const value = argv[index + 1];
    // A yes/no setting given alone (`--cluster.bootstrap`) means yes.
    if (isBoolSetting(settingAliases[name] ?? name) && (value === undefined || isOption(value))) {
      options.set(name, 'true');
      continue;
    }
    if (value === undefined) throw UsageError(`--${name} needs a value`);
    options.set(name, value);
    index += 1;
  }
  return { positional, options, flags };
}

function isBoolSetting(name: string): boolean {
  return isSettingName(name) && settingSpecs[name].kind === 'bool';
}

function isOption(arg: string): boolean {
  return arg.startsWith('--') || arg === '-h';
}

/** Settings from the config file, the environment and the flags, in that order. */
export function settingsFrom(args: ParsedArgs, spec: CommandSpec = {}): Settings {
  const flags: Record<string, string> = {};
  for (const [name, value] of args.options) {
    if (name === 'config' || spec.options?.has(name) === true) continue;
    const setting = settingAliases[name] ?? name;
    assert(isSettingName(setting), `parseArgs let an unknown option through: --${name}`);
    flags[setting] = value;
  }
  return loadSettings({ flags, env: process.env, configFile: args.options.get('config') });
}

/** The flags every service binary takes, for `--help`. */
export const SERVICE_FLAGS = `  --data-dir DIR             data directory (default ./data)
  --config FILE              settings as TOML (.toml) or JSON, before the environment and flags
  --log-level LEVEL          fatal|error|warn|info|debug|trace|silent (default info)
  --NAME VALUE               any setting by its dotted name, e.g. --security.native_api_token_ttl 2h
                             (environment: LIGHTWELL_ plus the name upper-cased, dots as underscores;
                             lightwell config lists them all)
  --version                  print the release and exit
`;

/** The public listener's flags, for `--help` of serve and of the gateway binary. */
export const PUBLIC_FLAGS = '  --public-listen HOST:PORT  public listener (default 0.0.0.0:9000)\n';

/** The admin listener's flag, for `--help` of serve and of the admin binary. */
export const ADMIN_FLAGS = '  --admin-listen HOST:PORT   admin listener (default 127.0.0.1:9001)\n';

/** The gateway's own flags, for `--help` of serve and of the gateway binary. */
export const GATEWAY_FLAGS =
  '  --gateway-threads N        listener threads per gateway (default 0: one per core up\n' +
  '                             to 4, divided among the gateways, two at the default budget)\n';

/** What `--version` prints: the program, the release, the on-disk format and Node's version. */
export function versionText(program: string): string {
  return `${program} ${RELEASE} (data format ${FORMAT_VERSION}, node ${process.version})\n`;
}

/**
 * Writes `text`, then exits with `code` once it is out: writes to a pipe are asynchronous on
 * POSIX, and an exit before they finish would cut them short. The promise never settles.
 */
/**
 * Ends a start that cannot go on, in one line on stderr: a usage error exits EXIT_USAGE with a
 * pointer to `<command> --help`, anything else EXIT_FAILURE as `<program>: cannot start: …`.
 */
export function refuseStart(
  error: unknown,
  names: { command: string; program: string },
  exit: (code: number) => never,
): Promise<never> {
  const usage = isUsageError(error);
  const text = usage
    ? `${names.command}: ${failureText(error)} (${names.command} --help lists the options)\n`
    : `${names.program}: cannot start: ${failureText(error)}\n`;
  return writeThenExit(process.stderr, text, usage ? EXIT_USAGE : EXIT_FAILURE, exit);
}

export function writeThenExit(
  stream: NodeJS.WritableStream,
  text: string,
  code: number,
  exit: (code: number) => never,
): Promise<never> {
  return new Promise<never>(() => {
    stream.write(text, () => exit(code));
  });
}
