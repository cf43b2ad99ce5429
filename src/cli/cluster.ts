// `lightwell cluster join-secret --data-dir DIR`: prints the join secret of a node that waits to
// be joined (the same secret as its ready line), for an operator who did not keep that line.
// Reading the data directory is the credential, as for admin tokens. A node that has joined has
// no join secret any more: that is an error (exit 1), not an empty line.

import { dataDirPaths, isDataDir } from '../engine/data-dir.js';
import { clusterPaths, readJoinSecretSync } from '../cluster/node-state.js';
import {
  parseArgs,
  settingsFrom,
  failureText,
  isUsageError,
  UsageError,
  EXIT_FAILURE,
  EXIT_USAGE,
} from './args.js';
import { NotFound } from '../util/errors.js';

const USAGE =
  'usage: lightwell cluster join-secret [--data-dir DIR]\n' +
  '  prints the join secret of a node that waits to be joined';

export function clusterCommand(argv: readonly string[]): number {
  try {
    const args = parseArgs(argv, { positional: true });
    if (args.flags.has('help')) {
      process.stdout.write(USAGE + '\n');
      return 0;
    }
    const [action, ...rest] = args.positional;
    if (action !== 'join-secret' || rest.length > 0)
      throw UsageError(action === undefined ? 'no action given' : `unknown action ${action}`);
    const paths = dataDirPaths(settingsFrom(args).string('data_dir'));
    if (!isDataDir(paths)) throw NotFound(`${paths.root} is not a Lightwell data directory`);
    const secret = readJoinSecretSync(clusterPaths(paths.root));
    if (secret === undefined)
      throw NotFound(
        `${paths.root} has no join secret: the node has joined a cluster, or has never run ` +
          'in cluster mode (lightwell serve --cluster.listen HOST:PORT --cluster.node_id ID)',
      );
    process.stdout.write(secret + '\n');
    return 0;
  } catch (error) {
    const usage = isUsageError(error);
    process.stderr.write(`lightwell cluster: ${failureText(error)}\n${usage ? USAGE + '\n' : ''}`);
    return usage ? EXIT_USAGE : EXIT_FAILURE;
  }
}
