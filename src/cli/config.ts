// `lightwell config`: every setting with its value, its default and where the value came from
// (default, file, env or flag), read exactly as `serve` would read them, and `--check`, which
// only validates them (a config file before a deploy) and starts nothing.
//
// Output: a table for people (NAME, VALUE, DEFAULT, SOURCE, one setting a line), or with
// `--json` `{settings: [{name, value, default, source, env, help}]}`. `--check` prints one line,
// `lightwell config: ok` (with the file named), and exits 0; a bad file, variable or flag exits
// 1 with the reason on stderr, as `serve` would refuse to start.

import { envName, settingSpecs, type SettingName, type Settings } from '../util/config.js';
import {
  parseArgs,
  settingsFrom,
  failureText,
  isUsageError,
  versionText,
  EXIT_FAILURE,
  EXIT_USAGE,
  type CommandSpec,
} from './args.js';

const COMMAND: CommandSpec = { flags: new Set(['json', 'check']) };

const USAGE =
  'usage: lightwell config [--config FILE] [--json] [--NAME VALUE …]\n' +
  '         every setting: its value, its default, and where the value came from\n' +
  '       lightwell config --check [--config FILE] [--NAME VALUE …]\n' +
  '         validates the settings (a config file) without starting anything: exit 0 or 1\n';

/** Sets the exit code: EXIT_USAGE for a command line it does not take, EXIT_FAILURE when bad. */
export function configCommand(argv: readonly string[]): void {
  let settings: Settings;
  let args;
  try {
    args = parseArgs(argv, COMMAND);
    if (args.flags.has('help')) {
      process.stdout.write(USAGE);
      return;
    }
    if (args.flags.has('version')) {
      process.stdout.write(versionText('lightwell'));
      return;
    }
    settings = settingsFrom(args, COMMAND);
  } catch (error) {
    const usage = isUsageError(error);
    const hint = usage ? ' (lightwell config --help shows the usage)' : '';
    process.stderr.write(`lightwell config: ${failureText(error)}${hint}\n`);
    process.exitCode = usage ? EXIT_USAGE : EXIT_FAILURE;
    return;
  }
  const file = args.options.get('config');
  if (args.flags.has('check')) {
    process.stdout.write(`lightwell config: ok${file === undefined ? '' : ` (${file})`}\n`);
    return;
  }
  const rows = (Object.keys(settingSpecs) as SettingName[]).map((name) => ({
    name,
    value: settings.raw[name],
    default: settingSpecs[name].fallback,
    source: settings.sources[name],
    env: envName(name),
    help: settingSpecs[name].help,
  }));
  if (args.flags.has('json')) {
    process.stdout.write(`${JSON.stringify({ settings: rows }, null, 2)}\n`);
    return;
  }
  process.stdout.write(table(rows));
}

/** Columns padded to their widest cell; an empty value shows as "" so that it is seen. */
function table(
  rows: ReadonlyArray<Record<'name' | 'value' | 'default' | 'source', string>>,
): string {
  const show = (text: string): string => (text === '' ? '""' : text);
  const lines = [
    ['NAME', 'VALUE', 'DEFAULT', 'SOURCE'],
    ...rows.map((row) => [row.name, show(row.value), show(row.default), row.source]),
  ];
  const widths = [0, 1, 2].map((column) =>
    Math.max(...lines.map((line) => (line[column] ?? '').length)),
  );
  return lines
    .map((line) =>
      line.map((cell, column) => (column < 3 ? cell.padEnd(widths[column] ?? 0) : cell)).join('  '),
    )
    .join('\n')
    .concat('\n');
}
