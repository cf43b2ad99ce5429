// Goal: `lightwell admin-token create` works on a stopped cluster member, as DECISIONS.md says
// ("It works whether or not the service is running"): the token is printed on the last line,
// stderr holds at most one line (never a stack), and once the member starts again the token is
// good on every member (docs/cluster.md §6, the admin-token outbox).
// Method: the cluster kit, three nodes on real etcd; n3 stopped with SIGTERM (n1 and n2 keep
// etcd's quorum), the token minted on n3's data directory, n3 started again, the token used on
// n1's admin API. Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';

const env = await clusterEnvironment();
const CLI = join(resolve(fileURLToPath(new URL('../../../', import.meta.url))), 'dist', 'bin');

function run(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [join(CLI, 'lightwell.js'), ...args], (error, stdout, stderr) =>
      done({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr }),
    );
  });
}

t.test('admin-token create on a stopped member', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  const [n1, , n3] = kit.nodes as [KitNode, KitNode, KitNode];
  await kit.formCluster(3);
  await n3.stop();
  const made = await run(['admin-token', 'create', '--data-dir', n3.dataDir, '--role', 'viewer']);
  t.equal(made.code, 0, `exit 0 (stderr: ${made.stderr})`);
  const token = made.stdout.trim().split('\n').pop() ?? '';
  t.match(token, /^lwadm_/, 'the token alone on the last line');
  t.ok(made.stderr.trim().split('\n').length <= 1, 'stderr is one line at most');
  t.notMatch(made.stderr, /Error|\n\s+at /, 'no stack, no raw error');
  await n3.start();
  await waitFor('the token minted offline on n3 to be good on n1', async () =>
    (await n1.adminWith(token, 'GET', '/cluster/consensus/membership')) === 200 ? true : undefined,
  );
  t.pass('the token is good on n1 once n3 has started');
});
