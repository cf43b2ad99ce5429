// `node dist/bench/cluster.js [--small N] [--large N]`: PUT throughput of a 3-node cluster
// against a single node on this machine, in the same run (docs/benchmarks.md, "Cluster").
//
// Starts a single node, then a 3-node cluster (bootstrap + two joins, etcd from
// `cluster.etcd_bin`, default `etcd`), each on its own loopback addresses (127.78.R.2 and up),
// and drives the native API of the single node and of the cluster's first node with the same
// load: N 4 KiB PUTs, 16 at a time, then M 64 MiB PUTs one at a time. Prints a markdown table
// with the ratios, and the 4 KiB PUTs again through the cluster's second node, which forwards
// each to the partition's leader (docs/cluster.md §8). Then a fourth node joins and a rebalance
// of the tenant copies its share of the data onto it: the bytes copied over the rebalance's
// seconds. Every PUT must answer 200; speed is never asserted. Everything it started is stopped
// and its directories removed at the end, also after a failure.

import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { BenchError } from './bench-error.js';

const execFileAsync = promisify(execFile);
const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'lightwell.js');
const SMALL_BYTES = 4 * 1024;
const LARGE_BYTES = 64 * 1024 * 1024;
const SMALL_CONCURRENCY = 16;

interface Node {
  readonly host: string;
  readonly dir: string;
  child?: ChildProcess;
  output: string;
}

async function startNode(node: Node, args: readonly string[]): Promise<void> {
  const child = spawn(
    process.execPath,
    [
      CLI,
      'serve',
      '--data-dir',
      node.dir,
      '--public-listen',
      `${node.host}:9000`,
      '--admin-listen',
      `${node.host}:9001`,
      '--log-level',
      'warn',
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  node.child = child;
  child.stdout.on('data', (data: Buffer) => (node.output += data.toString()));
  child.stderr.on('data', (data: Buffer) => (node.output += data.toString()));
  const ready = args.includes('--cluster.listen') ? /lightwell: cluster: .*\n/ : /admin listener/;
  for (let waited = 0; !ready.test(node.output); waited += 100) {
    if (child.exitCode !== null || waited > 60_000)
      throw new BenchError(`node on ${node.host} did not start:\n${node.output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function admin(node: Node, token: string, path: string, body: unknown): Promise<unknown> {
  const response = await fetch(`http://${node.host}:9001/admin/api/v1${path}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new BenchError(`${path} answered ${response.status}: ${text}`);
  return JSON.parse(text) as unknown;
}

async function ownerToken(node: Node): Promise<string> {
  const { stdout } = await execFileAsync(process.execPath, [
    CLI,
    'admin-token',
    'create',
    '--data-dir',
    node.dir,
    '--role',
    'owner',
  ]);
  return stdout.trim().split('\n').pop() ?? '';
}

/** A tenant, a key, a bearer token and a bucket `bench` on `node`. */
async function prepare(node: Node): Promise<string> {
  const token = await ownerToken(node);
  await admin(node, token, '/tenants', { id: 'bench' });
  await admin(node, token, '/tenants/bench/accounts', { id: 'app' });
  const key = (await admin(node, token, '/tenants/bench/keys', {
    accountId: 'app',
    scopes: 'read,write,delete,admin',
  })) as { accessKeyId: string; secretKey: string };
  const basic = Buffer.from(`${key.accessKeyId}:${key.secretKey}`).toString('base64');
  const minted = await fetch(`http://${node.host}:9000/api/v1/auth/token`, {
    method: 'POST',
    headers: { Authorization: `Basic ${basic}` },
  });
  const bearer = ((await minted.json()) as { token: string }).token;
  const bucket = await fetch(`http://${node.host}:9000/api/v1/buckets`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'bench' }),
  });
  if (bucket.status !== 201) throw new BenchError(`bucket: ${await bucket.text()}`);
  return bearer;
}

async function put(node: Node, bearer: string, key: string, body: Buffer): Promise<void> {
  const response = await fetch(`http://${node.host}:9000/api/v1/buckets/bench/objects/${key}`, {
    method: 'PUT',
    headers: { Authorization: `Bearer ${bearer}` },
    body,
  });
  await response.arrayBuffer();
  if (response.status !== 200) throw new BenchError(`PUT ${key} answered ${response.status}`);
}

/** 4 KiB PUTs per second and 64 MiB PUT MB/s through `node`. */
async function measure(
  node: Node,
  bearer: string,
  counts: { small: number; large: number },
): Promise<{ smallPerS: number; largeMBs: number }> {
  const smallPerS = await measureSmall(node, bearer, counts.small, 's');
  const large = randomBytes(LARGE_BYTES);
  const largeStarted = performance.now();
  for (let index = 0; index < counts.large; index += 1)
    await put(node, bearer, `l-${index}`, large);
  const seconds = (performance.now() - largeStarted) / 1000;
  return { smallPerS, largeMBs: (counts.large * LARGE_BYTES) / 1e6 / seconds };
}

/** 4 KiB PUTs per second through `node`, 16 at a time, under keys `<prefix>-N`. */
async function measureSmall(
  node: Node,
  bearer: string,
  count: number,
  prefix: string,
): Promise<number> {
  const small = randomBytes(SMALL_BYTES);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: SMALL_CONCURRENCY }, async () => {
      while (next < count) await put(node, bearer, `${prefix}-${next++}`, small);
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

async function formCluster(nodes: readonly Node[]): Promise<void> {
  const [first, ...others] = nodes as [Node, ...Node[]];
  const clusterArgs = (node: Node, id: string): string[] => [
    '--cluster.listen',
    `${node.host}:7000`,
    '--cluster.node_id',
    id,
  ];
  await startNode(first, [...clusterArgs(first, 'n1'), '--cluster.bootstrap']);
  const token = await ownerToken(first);
  for (const [index, node] of others.entries()) {
    const id = `n${index + 2}`;
    await startNode(node, clusterArgs(node, id));
    const secret = /secret (lwjoin_[A-Za-z0-9_-]+)/.exec(node.output)?.[1] ?? '';
    const joined = { id, address: `${node.host}:7000`, secret, reason: 'bench', confirm: id };
    await admin(first, token, '/cluster/consensus/join', joined);
  }
}

/** The report of rebalance job `jobId` once it has ended (polled every 250 ms). */
async function jobReport(
  node: Node,
  token: string,
  jobId: string,
): Promise<{ replication?: { counts: { bytesSent: number } } }> {
  for (;;) {
    const response = await fetch(
      `http://${node.host}:9001/admin/api/v1/cluster/repair/jobs/${jobId}`,
      { headers: { Authorization: `Bearer ${token}` } },
    );
    const job = JSON.parse(await response.text()) as { state?: string; result?: object };
    if (job.state === 'succeeded') return job.result ?? {};
    if (job.state !== 'running' && job.state !== 'queued')
      throw new BenchError(`rebalance job ${jobId}: ${JSON.stringify(job)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Joins `joiner` to the cluster of `first` and rebalances the tenant `bench` onto it. */
async function rebalanceOnto(
  first: Node,
  joiner: Node,
): Promise<{ bytes: number; seconds: number }> {
  await startNode(joiner, ['--cluster.listen', `${joiner.host}:7000`, '--cluster.node_id', 'n4']);
  const token = await ownerToken(first);
  const secret = /secret (lwjoin_[A-Za-z0-9_-]+)/.exec(joiner.output)?.[1] ?? '';
  const body = { id: 'n4', address: `${joiner.host}:7000`, secret, reason: 'bench', confirm: 'n4' };
  await admin(first, token, '/cluster/consensus/join', body);
  // Every member re-reads the membership within 2 s (cluster-view.ts).
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const started = performance.now();
  let report = (await admin(first, token, '/cluster/repair/rebalance', {
    tenantId: 'bench',
    reason: 'bench',
    confirmTenant: 'bench',
  })) as { jobId?: string; replication?: { counts: { bytesSent: number } } };
  // Past 3 s the rebalance answers 202 and goes on as a job: its report comes from the job.
  if (report.jobId !== undefined) report = await jobReport(first, token, report.jobId);
  const seconds = (performance.now() - started) / 1000;
  return { bytes: report.replication?.counts.bytesSent ?? 0, seconds };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      small: { type: 'string', default: '2000' },
      large: { type: 'string', default: '4' },
    },
  });
  const counts = { small: Number(values.small), large: Number(values.large) };
  const root = mkdtempSync(join(tmpdir(), 'lw-bench-cluster-'));
  const run = 1 + ((randomBytes(1)[0] as number) % 250);
  const nodes: Node[] = Array.from({ length: 5 }, (_, index) => ({
    host: `127.78.${run}.${index + 2}`,
    dir: join(root, `n${index}`),
    output: '',
  }));
  try {
    const single = nodes[0] as Node;
    await startNode(single, []);
    const alone = await measure(single, await prepare(single), counts);
    process.kill(-(single.child?.pid ?? 0), 'SIGTERM');
    const cluster = nodes.slice(1, 4);
    await formCluster(cluster);
    const bearer = await prepare(cluster[0] as Node);
    const together = await measure(cluster[0] as Node, bearer, counts);
    // The first node leads every partition of a cluster formed by joins (layout.ts keeps the
    // replicas a partition had): through the second, every PUT is forwarded to it.
    const forwarded = await measureSmall(cluster[1] as Node, bearer, counts.small, 'f');
    const moved = await rebalanceOnto(cluster[0] as Node, nodes[4] as Node);
    const row = (name: string, a: number, b: number, unit: string): string =>
      `| ${name} | ${a.toFixed(1)} ${unit} | ${b.toFixed(1)} ${unit} | ${(b / a).toFixed(2)} |`;
    process.stdout.write(
      [
        '| PUT | single node | 3-node cluster, replication factor 3 | ratio |',
        '|---|---|---|---|',
        row(`4 KiB × ${counts.small}, 16 at a time`, alone.smallPerS, together.smallPerS, '/s'),
        row(`64 MiB × ${counts.large}, one at a time`, alone.largeMBs, together.largeMBs, 'MB/s'),
        row(
          `4 KiB × ${counts.small} through a node that does not lead (forwarded)`,
          alone.smallPerS,
          forwarded,
          '/s',
        ),
        '',
        `Rebalance onto a fourth node: ${(moved.bytes / 1e6).toFixed(1)} MB in ` +
          `${moved.seconds.toFixed(1)} s, ${(moved.bytes / 1e6 / moved.seconds).toFixed(1)} MB/s`,
      ].join('\n') + '\n',
    );
  } finally {
    for (const node of nodes)
      if (node.child?.pid !== undefined && node.child.exitCode === null)
        try {
          process.kill(-node.child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
