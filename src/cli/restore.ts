// `lightwell restore --from BACKUP_DIR --data-dir DIR`: restores a backup the engine wrote
// (src/engine/backup.ts) into an empty data directory, offline. Every file is checked against
// the backup's manifest (size and SHA-256) before the directory appears; a mismatch restores
// nothing. The restored directory holds the backup's master key: `lightwell serve --data-dir
// DIR` then serves the store as it was at the backup's snapshot.
//
// Output: one line on stdout, `restored <files> files (<bytes> bytes): <tenants> tenants,
// <buckets> buckets, <versions> versions, snapshot <time>`, or with `--json` the same as one
// object. Exit codes: 0 done, 1 refused (not empty, not a backup, a damaged file), 2 usage.

import { restoreBackup } from '../engine/backup.js';
import {
  parseArgs,
  settingsFrom,
  failureText,
  isUsageError,
  UsageError,
  EXIT_FAILURE,
  EXIT_USAGE,
  type CommandSpec,
} from './args.js';

const USAGE =
  'usage: lightwell restore --from BACKUP_DIR --data-dir DIR [--json]\n' +
  '  (DIR must be absent or empty; BACKUP_DIR is backup.directory/<name>)';

const COMMAND: CommandSpec = { options: new Set(['from']), flags: new Set(['json']) };

/** Sets the exit code as the header says. */
export async function restoreCommand(argv: readonly string[]): Promise<void> {
  try {
    const args = parseArgs(argv, COMMAND);
    if (args.flags.has('help')) {
      process.stdout.write(`${USAGE}\n`);
      return;
    }
    const from = args.options.get('from');
    if (from === undefined) throw UsageError('--from names the backup to restore');
    if (!args.options.has('data-dir')) throw UsageError('--data-dir names the directory to fill');
    const settings = settingsFrom(args, COMMAND);
    if (process.env['LIGHTWELL_MASTER_KEY_FILE'])
      process.stderr.write(
        'lightwell restore: the restored key is DIR/keys/master.key; LIGHTWELL_MASTER_KEY_FILE ' +
          'must name it (or be unset) when the restored store is served\n',
      );
    const result = await restoreBackup(from, settings.string('data_dir'));
    if (args.flags.has('json')) {
      process.stdout.write(`${JSON.stringify(result)}\n`);
      return;
    }
    const { counts } = result;
    process.stdout.write(
      `restored ${result.files} files (${result.bytes} bytes): ${counts.tenants} tenants, ` +
        `${counts.buckets} buckets, ${counts.versions} versions, snapshot ${result.snapshotAt}\n`,
    );
  } catch (error) {
    const usage = isUsageError(error);
    process.stderr.write(`lightwell restore: ${failureText(error)}\n`);
    process.exitCode = usage ? EXIT_USAGE : EXIT_FAILURE;
  }
}
