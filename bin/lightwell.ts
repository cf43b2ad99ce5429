#!/usr/bin/env node
// lightwell: the command-line tool (serve, admin-token, config, bench).

// A reader that closes the pipe early (`lightwell admin-token list | head`) ends the output
// quietly, as in other command-line tools, instead of with an EPIPE stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const [command, ...rest] = process.argv.slice(2);
const usage = `usage: lightwell serve [--data-dir DIR] [--public-listen HOST:PORT] [--admin-listen HOST:PORT] [--gateways N] [--config FILE]
                       (lightwell serve --help lists every flag)
       lightwell admin-token create --role viewer|operator|owner [--tenant ID] [--expires 30d|RFC3339] [--name TEXT] [--json]
       lightwell admin-token list [--json]
       lightwell admin-token revoke ID
       lightwell restore --from BACKUP_DIR --data-dir DIR [--json]
       lightwell cluster join-secret [--data-dir DIR]
       lightwell kms-key create|list|delete TENANT [KEY_ID]   named SSE-KMS keys (--help)
       lightwell config [--config FILE] [--json]   every setting, its default, value and source
       lightwell config --check --config FILE      validates settings without starting anything
       lightwell ingest DIR --bucket B [--prefix P] [--endpoint URL] [--connections N]
                       (lightwell ingest --help lists every flag)
       lightwell bench [--quick] [--only NAME,…] [--out DIR] [--endpoint URL --token TOKEN] …
                       (lightwell bench --help lists every flag)
       lightwell --version
`;
// Each command loads only its own modules: `serve` stays a small supervisor (it never opens the
// index, so it does not load LMDB), and the other commands start faster.
if (command === 'serve') {
  const { serve } = await import('../src/cli/serve.js');
  await serve(rest, (code) => process.exit(code));
} else if (command === 'admin-token') {
  const { adminToken } = await import('../src/cli/admin-token.js');
  await adminToken(rest);
} else if (command === 'restore') {
  const { restoreCommand } = await import('../src/cli/restore.js');
  await restoreCommand(rest);
} else if (command === 'ingest') {
  const { ingestCommand } = await import('../src/cli/ingest.js');
  await ingestCommand(rest);
} else if (command === 'cluster') {
  const { clusterCommand } = await import('../src/cli/cluster.js');
  process.exitCode = clusterCommand(rest);
} else if (command === 'kms-key') {
  const { kmsKeyCommand } = await import('../src/cli/kms-key.js');
  process.exitCode = await kmsKeyCommand(rest);
} else if (command === 'config') {
  const { configCommand } = await import('../src/cli/config.js');
  configCommand(rest);
} else if (command === '--version' || command === 'version') {
  const { versionText } = await import('../src/cli/args.js');
  process.stdout.write(versionText('lightwell'));
} else if (command === 'bench') {
  // The benchmark is a client of the public port, not part of the service: it lives in bench/,
  // outside src/, and is loaded only for this command.
  const { runBenchAsService } = await import('../bench/run.js');
  process.exitCode = await runBenchAsService(rest);
} else if (command === 'help' || command === '--help' || command === '-h') {
  process.stdout.write(usage);
} else {
  // No command or an unknown one is a usage error: the usage on stderr, exit code 2.
  process.stderr.write(command === undefined ? usage : `unknown command ${command}\n${usage}`);
  process.exitCode = 2;
}
