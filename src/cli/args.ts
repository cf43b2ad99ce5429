// Command-line parsing shared by every binary: `--flag value`, `--flag=value`, boolean flags,
// and settings by their dotted names (`--security.native_api_token_ttl 2h`). `--help` and `-h`
// are the `help` flag: every binary then prints its usage and exits 0 without starting.

import { isSettingName, loadSettings, type Settings } from '../util/config.js';
import { BadRequest } from '../util/errors.js';

export interface ParsedArgs {
  readonly positional: string[];
  readonly options: Map<string, string>;
  readonly flags: Set<string>;
}

const booleanFlags = new Set(['json', 'help', 'quick']);

/** Flag spellings of the settings a user sets most (DECISIONS.md). */
const settingAliases: Record<string, string> = {
  'data-dir': 'data_dir',
  'public-listen': 'public_listen',
  'admin-listen': 'admin_listen',
  gateways: 'gateways',
  workers: 'workers',
  'log-level': 'log.level',
};

/**
 * `known` names the options a command takes besides the settings (as `settingsFrom` does), so
 * that an unknown option given last is called unknown, not short of a value.
 */
export function parseArgs(
  argv: readonly string[],
  known: ReadonlySet<string> = new Set(),
): ParsedArgs {
  const positional: string[] = [];
  const options = new Map<string, string>();
  const flags = new Set<string>();
  for (let index = 0; index < argv.length; index += 1) {
    const arg = argv[index] as string;
    if (arg === '-h') {
      flags.add('help');
      continue;
    }
    if (!arg.startsWith('--')) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    if (eq >= 0) options.set(name, arg.slice(eq + 1));
    else if (booleanFlags.has(name)) flags.add(name);
    else {
      const value = argv[index + 1];
      if (value === undefined) {
        const takesValue =
          name === 'config' || known.has(name) || isSettingName(settingAliases[name] ?? name);
        throw BadRequest(takesValue ? `--${name} needs a value` : `unknown option --${name}`);
      }
      options.set(name, value);
      index += 1;
    }
  }
  return { positional, options, flags };
}

/** Settings from the config file, the environment and the flags, in that order. */
export function settingsFrom(args: ParsedArgs, known: ReadonlySet<string> = new Set()): Settings {
  const flags: Record<string, string> = {};
  for (const [name, value] of args.options) {
    if (name === 'config' || known.has(name)) continue;
    const setting = settingAliases[name] ?? name;
    if (!isSettingName(setting)) throw BadRequest(`unknown option --${name}`);
    flags[setting] = value;
  }
  return loadSettings({ flags, env: process.env, configFile: args.options.get('config') });
}

/** The flags every service binary takes, for `--help`. */
export const SERVICE_FLAGS = `  --data-dir DIR            data directory (default ./data)
  --public-listen HOST:PORT  public listener (default 0.0.0.0:9000)
  --admin-listen HOST:PORT   admin listener (default 127.0.0.1:9001)
  --config FILE              settings as JSON, before the environment and the flags
  --log-level LEVEL          trace|debug|info|warn|error|silent (default info)
  --NAME VALUE               any setting by its dotted name, e.g. --security.native_api_token_ttl 2h
                             (environment: LIGHTWELL_ plus the name upper-cased, dots as underscores)
`;

/**
 * Writes `text`, then exits with `code` once it is out: writes to a pipe are asynchronous on
 * POSIX, and an exit before they finish would cut them short. The promise never settles.
 */
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
