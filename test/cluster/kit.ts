// The cluster test kit: starts 3 to 5 Lightwell nodes on this machine, each with its own
// address, and etcd from Debian's `etcd-server` (installed with apt-get when missing and this
// process is root).
//
// - Network: as root, one network namespace per node (scripts/cluster-net.sh: veth pairs on a
//   bridge, names unique per run); a node can then be cut off (`partition`) and healed. Where
//   namespaces cannot be made, each node gets a loopback address 127.S.T.2 and up (S, T random
//   per run), and `canPartition` is false: tests that need a partition skip with a reason.
// - Without etcd (not root and not installed, or the install failed) `clusterEnvironment()`
//   answers a skip reason, and every cluster test skips with it, visibly.
// - Every wait names what it waits for; `close()` (registered with t.teardown by `start`) kills
//   every process of the run and removes its network and data, also after a failure.

import { spawn, execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { partitionOf } from '../../src/cluster/layout.js';

const execFileAsync = promisify(execFile);
const ROOT = resolve(fileURLToPath(new URL('../../../', import.meta.url)));
const CLI = join(ROOT, 'dist', 'bin', 'lightwell.js');
const NET = join(ROOT, 'scripts', 'cluster-net.sh');
/** Ports inside a node's own address (each node has its own address, so all alike). */
export const PORTS = { public: 9000, admin: 9001, cluster: 7000 } as const;

/** A node's ports: PORTS on its own address, or its own ports on an address shared by all. */
interface NodePorts {
  readonly public: number;
  readonly admin: number;
  readonly cluster: number;
  /** Its etcd member's client and peer ports, when the address is shared. */
  readonly etcd?: { readonly client: number; readonly peer: number };
}
const START_MS_MAX = 90_000;
/** Whether this run collects coverage (tap's setting, as test/helpers/plain-children.ts reads it). */
const COVERAGE = process.env['_TAPJS_PROCESSINFO_COVERAGE_'] === '1';

export interface ClusterEnvironment {
  /** Why cluster tests cannot run here; undefined when they can. */
  readonly skip: string | undefined;
  readonly etcdBin: string;
  readonly namespaces: boolean;
  /** Why a network partition cannot be made here; undefined when it can. */
  readonly partitionSkip: string | undefined;
}

let environment: Promise<ClusterEnvironment> | undefined;

/** Whether cluster tests can run, installing etcd-server when root and missing (once). */
export function clusterEnvironment(): Promise<ClusterEnvironment> {
  environment ??= probeEnvironment();
  return environment;
}

async function probeEnvironment(): Promise<ClusterEnvironment> {
  const root = process.getuid?.() === 0;
  let etcdBin = which('etcd');
  if (etcdBin === undefined && root) {
    await aptInstall(['etcd-server']);
    etcdBin = which('etcd');
  }
  if (etcdBin === undefined)
    return {
      skip: root
        ? 'etcd is not installed and apt-get install etcd-server failed'
        : 'etcd is not installed (apt-get install etcd-server) and this is not root',
      etcdBin: '',
      namespaces: false,
      partitionSkip: 'no etcd',
    };
  const namespaces = root && canMakeNamespace();
  return {
    skip: undefined,
    etcdBin,
    namespaces,
    partitionSkip: namespaces
      ? undefined
      : 'network namespaces cannot be made here (needs root and ip netns): no partition',
  };
}

function which(name: string): string | undefined {
  try {
    return (
      execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

async function aptInstall(packages: readonly string[]): Promise<void> {
  const install = ['-o', 'DPkg::Lock::Timeout=600', 'install', '-y', ...packages];
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  try {
    await execFileAsync('apt-get', install, { env });
  } catch {
    await execFileAsync('apt-get', ['update'], { env }).catch(() => undefined);
    await execFileAsync('apt-get', install, { env }).catch(() => undefined);
  }
}

function canMakeNamespace(): boolean {
  const name = `lw-probe-${randomBytes(3).toString('hex')}`;
  try {
    execFileSync('ip', ['netns', 'add', name], { stdio: 'ignore' });
    execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Waits for `probe` to answer a value; the timeout error names `what`. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}` +
          (last === undefined ? '' : ` (last error: ${(last as Error).message})`),
      );
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export interface Answer {
  readonly status: number;
  readonly json: Record<string, unknown>;
}

export class KitNode {
  private child: ChildProcess | undefined;
  output = '';
  private readonly tokens = new Map<string, string>();

  constructor(
    private readonly kit: ClusterKit,
    readonly index: number,
    readonly id: string,
    readonly host: string,
    readonly dataDir: string,
    readonly ports: NodePorts = PORTS,
  ) {}

  get clusterAddress(): string {
    return `${this.host}:${this.ports.cluster}`;
  }
  get adminUrl(): string {
    return `http://${this.host}:${this.ports.admin}/admin/api/v1`;
  }
  get publicUrl(): string {
    return `http://${this.host}:${this.ports.public}/api/v1`;
  }

  /** Starts `lightwell serve` in cluster mode; resolves once its ready lines are printed. */
  async start(options: { bootstrap?: boolean; args?: readonly string[] } = {}): Promise<void> {
    const serve = [
      CLI,
      'serve',
      '--data-dir',
      this.dataDir,
      '--public-listen',
      `${this.host}:${this.ports.public}`,
      '--admin-listen',
      `${this.host}:${this.ports.admin}`,
      '--cluster.listen',
      this.clusterAddress,
      '--cluster.node_id',
      this.id,
      '--cluster.etcd_bin',
      this.kit.env.etcdBin,
      '--gateways',
      '1',
      '--workers',
      '1',
      '--gateway-threads',
      '1',
      '--log-level',
      'warn',
      ...(this.kit.clientHost === undefined
        ? []
        : ['--security.trusted_proxy', this.kit.clientHost]),
      ...(this.ports.etcd === undefined
        ? []
        : [
            '--cluster.etcd_client_listen',
            `${this.host}:${this.ports.etcd.client}`,
            '--cluster.etcd_peer_listen',
            `${this.host}:${this.ports.etcd.peer}`,
          ]),
      ...(options.bootstrap === true ? ['--cluster.bootstrap'] : []),
      ...(options.args ?? []),
    ];
    const [command, args] = this.kit.wrap(this.index, [process.execPath, ...serve]);
    // Its own process group: kill9 reaches the supervisor, its children and etcd at once.
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    this.child = child;
    this.output = '';
    child.stdout.on('data', (data: Buffer) => (this.output += data.toString()));
    child.stderr.on('data', (data: Buffer) => (this.output += data.toString()));
    await waitFor(
      `node ${this.id} to print its cluster ready line`,
      () => {
        if (child.exitCode !== null)
          throw new Error(`node ${this.id} exited (${child.exitCode}):\n${this.output}`);
        return Promise.resolve(/lightwell: cluster: .*\n/.test(this.output) ? true : undefined);
      },
      START_MS_MAX,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n--- output of ${this.id} ---\n${this.output}`);
    });
  }

  /** The join secret from the ready line (a node that waits to be joined). */
  joinSecret(): string {
    const match = /cluster: waiting to be joined, secret (lwjoin_[A-Za-z0-9_-]+)/.exec(this.output);
    if (match?.[1] === undefined) throw new Error(`node ${this.id} printed no join secret`);
    return match[1];
  }

  /** An admin token of this node (admin tokens are per node until they are cluster-wide). */
  async token(role: 'viewer' | 'operator' | 'owner' = 'owner'): Promise<string> {
    const cached = this.tokens.get(role);
    if (cached !== undefined) return cached;
    const { stdout } = await execFileAsync(process.execPath, [
      CLI,
      'admin-token',
      'create',
      '--data-dir',
      this.dataDir,
      '--role',
      role,
    ]);
    const token = stdout.trim().split('\n').pop() ?? '';
    this.tokens.set(role, token);
    return token;
  }

  /** `lightwell cluster join-secret --data-dir DIR`: its exit code, stdout and stderr. */
  async joinSecretCli(): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await execFileAsync(process.execPath, [
        CLI,
        'cluster',
        'join-secret',
        '--data-dir',
        this.dataDir,
      ]);
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code: number; stdout: string; stderr: string };
      return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
    }
  }

  /** `lightwell admin-token ARGS --data-dir DIR` on this node's data directory; its stdout. */
  async adminTokenCli(args: readonly string[]): Promise<string> {
    const { stdout } = await execFileAsync(process.execPath, [
      CLI,
      'admin-token',
      ...args,
      '--data-dir',
      this.dataDir,
    ]);
    return stdout;
  }

  /** One admin request with `token` (undefined: none). */
  async adminWith(token: string | undefined, method: string, path: string): Promise<number> {
    const headers: Record<string, string> = {};
    if (token !== undefined) headers['Authorization'] = `Bearer ${token}`;
    const response = await fetch(this.adminUrl + path, {
      method,
      headers,
      signal: AbortSignal.timeout(60_000),
    });
    await response.arrayBuffer();
    return response.status;
  }

  /** One admin request with this node's token of `role`. */
  async admin(
    method: string,
    path: string,
    body?: unknown,
    role: 'viewer' | 'operator' | 'owner' = 'owner',
  ): Promise<Answer> {
    const init: RequestInit = {
      method,
      headers: {
        Authorization: `Bearer ${await this.token(role)}`,
        'Content-Type': 'application/json',
      },
      signal: AbortSignal.timeout(120_000),
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(this.adminUrl + path, init);
    const text = await response.text();
    return { status: response.status, json: (text ? JSON.parse(text) : {}) as Answer['json'] };
  }

  /**
   * `POST /cluster/repair/rebalance` on this node: its report, from the answer (200) or, when it
   * went on as a job (202), from `GET /cluster/repair/jobs/{jobId}` once the job has ended.
   */
  async rebalance(body: Record<string, unknown>, dryRun = false): Promise<Answer> {
    const query = dryRun ? '?dryRun=true' : '';
    const answer = await this.admin('POST', `/cluster/repair/rebalance${query}`, body);
    if (answer.status !== 202) return answer;
    const jobId = String(answer.json['jobId']);
    const job = await waitFor(
      `rebalance job ${jobId} on ${this.id} to end`,
      async () => {
        const polled = await this.admin('GET', `/cluster/repair/jobs/${jobId}`);
        const state = polled.json['state'];
        return state === 'succeeded' || state === 'failed' ? polled.json : undefined;
      },
      300_000,
    );
    if (job['state'] === 'failed') return { status: 503, json: job['error'] as Answer['json'] };
    return { status: 200, json: job['result'] as Answer['json'] };
  }

  /** Waits until this node's membership view shows every member of `ids` live. */
  async waitLive(ids: readonly string[]): Promise<void> {
    await waitFor(`${ids.join(', ')} live in the membership ${this.id} sees`, async () => {
      const answer = await this.admin('GET', '/cluster/consensus/membership');
      if (answer.status !== 200) throw new Error(`membership answered ${answer.status}`);
      const members = answer.json['members'] as Array<{ id: string; live: boolean }>;
      const live = new Set(members.filter((member) => member.live).map((member) => member.id));
      return ids.every((id) => live.has(id)) ? true : undefined;
    });
  }

  /** SIGTERM to the supervisor; resolves when it has exited. */
  async stop(): Promise<void> {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.killGroup(), 30_000);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill('SIGTERM');
    });
    this.killGroup(); // anything left behind (etcd) goes too
  }

  /**
   * SIGKILL to the supervisor alone, as an out-of-memory killer may do: its service children
   * notice and stop, its etcd member is left running (the next start must deal with it).
   */
  async killSupervisor(): Promise<void> {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  /**
   * SIGKILL to the whole process group: supervisor, engine, gateway, admin and etcd (also what a
   * supervisor that has exited left running).
   */
  async kill9(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    if (child.exitCode !== null || child.signalCode !== null) {
      this.killGroup();
      return;
    }
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    this.killGroup();
    await exited;
  }

  /** A signal to the whole process group (SIGSTOP freezes the node, SIGCONT resumes it). */
  signalGroup(signal: 'SIGSTOP' | 'SIGCONT'): void {
    const pid = this.child?.pid;
    if (pid !== undefined) process.kill(-pid, signal);
  }

  private killGroup(): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

export class ClusterKit {
  readonly nodes: KitNode[] = [];
  private readonly root: string;
  private netUp = false;

  private constructor(
    readonly env: ClusterEnvironment,
    readonly run: string,
  ) {
    this.root = mkdtempSync(join(tmpdir(), `lw-cluster-${run}-`));
  }

  get canPartition(): boolean {
    return this.netUp;
  }

  /**
   * The address the tests' requests come from: the bridge's, in namespaces. Nodes take it as a
   * trusted proxy, so that tokens are minted over plain HTTP as from loopback.
   */
  get clientHost(): string | undefined {
    const first = this.nodes[0];
    return this.netUp && first ? first.host.replace(/\.\d+$/, '.1') : undefined;
  }

  /**
   * Makes the network and the nodes' directories (no node runs yet). `sameHost`: every node on
   * one loopback address, with consecutive `cluster.listen` ports (7001, 7002, …) as an operator
   * running several nodes on one machine would give them.
   */
  static async create(
    count: number,
    teardown: (fn: () => Promise<void>) => void,
    options: { sameHost?: boolean } = {},
  ) {
    const env = await clusterEnvironment();
    if (env.skip !== undefined) throw new Error(`cluster tests cannot run: ${env.skip}`);
    const kit = new ClusterKit(env, randomBytes(3).toString('hex'));
    teardown(() => kit.close());
    const shared = options.sameHost === true;
    const hosts = shared
      ? new Array<string>(count).fill(loopbackHosts(1)[0] as string)
      : env.namespaces
        ? await kit.makeNetwork(count)
        : loopbackHosts(count);
    for (let index = 0; index < count; index += 1) {
      const n = index + 1;
      const ports = shared
        ? {
            public: 9000 + 2 * n,
            admin: 9001 + 2 * n,
            cluster: 7000 + n,
            etcd: { client: 2379 + 10 * n, peer: 2380 + 10 * n },
          }
        : PORTS;
      kit.nodes.push(
        new KitNode(kit, n, `n${n}`, hosts[index] as string, join(kit.root, `n${n}`), ports),
      );
    }
    return kit;
  }

  private async makeNetwork(count: number): Promise<string[]> {
    this.netUp = true; // set first: a failure half-way is still torn down
    const { stdout } = await execFileAsync(NET, ['up', this.run, String(count)]);
    const lines = stdout.trim().split('\n');
    return lines.slice(1);
  }

  /** The command that runs `argv` on node `index`'s network. */
  wrap(index: number, argv: readonly string[]): [string, string[]] {
    if (!this.netUp) return [argv[0] as string, argv.slice(1)];
    return ['ip', ['netns', 'exec', `lw-${this.run}-${index}`, ...argv]];
  }

  async partition(node: KitNode): Promise<void> {
    await execFileAsync(NET, ['cut', this.run, String(node.index)]);
  }

  async heal(node: KitNode): Promise<void> {
    await execFileAsync(NET, ['heal', this.run, String(node.index)]);
  }

  /** Bootstraps node 1 and joins the next `count - 1` nodes through node 1's admin API. */
  async formCluster(count = this.nodes.length): Promise<void> {
    const [first, ...others] = this.nodes.slice(0, count) as [KitNode, ...KitNode[]];
    await Promise.all([first.start({ bootstrap: true }), ...others.map((node) => node.start())]);
    for (const node of others) {
      const answer = await this.join(first, node);
      if (answer.status !== 200)
        throw new Error(
          `join of ${node.id} answered ${answer.status}: ${JSON.stringify(answer.json)}`,
        );
    }
  }

  /**
   * `POST /cluster/consensus/join` of `node` through `via`; after a 200, waits until `via` sees
   * the new member live. etcd refuses the next join while a voter is down (`voter_down`), and a
   * member counts as down until it has written its liveness key, which may come after the answer.
   */
  async join(via: KitNode, node: KitNode, extra: Record<string, unknown> = {}): Promise<Answer> {
    const answer = await via.admin('POST', '/cluster/consensus/join', joinBody(node, extra));
    if (answer.status === 200) await via.waitLive([node.id]);
    return answer;
  }

  /**
   * Kills every node (SIGKILL to each process group) and removes the network and the data. No
   * node is stopped cleanly: nothing reads the data again, and members that stop together each
   * wait on an etcd that is losing its quorum (3 nodes stopped by SIGTERM at once took 8 s).
   * With coverage on they are stopped cleanly, since a process writes its coverage at its exit.
   */
  async close(): Promise<void> {
    await Promise.all(
      this.nodes.map((node) => (COVERAGE ? node.stop().catch(() => node.kill9()) : node.kill9())),
    );
    if (this.netUp) await execFileAsync(NET, ['down', this.run]).catch(() => undefined);
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** The join body for `node`, as DECISIONS.md gives it. */
export function joinBody(
  node: KitNode,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id: node.id,
    address: node.clusterAddress,
    secret: node.joinSecret(),
    reason: 'test cluster',
    confirm: node.id,
    ...extra,
  };
}

/** 127.S.T.2 and up, S and T random: parallel runs take different addresses. */
function loopbackHosts(count: number): string[] {
  const [s, t] = [1 + ((randomBytes(1)[0] as number) % 254), (randomBytes(1)[0] as number) % 256];
  return Array.from({ length: count }, (_, index) => `127.${s}.${t}.${index + 2}`);
}

/**
 * The replicas of bucket `bucketId` in the stored layout (its partition's, in order), as
 * `node`'s `GET /cluster/layout` answers them.
 */
export async function replicasOfBucket(node: KitNode, bucketId: number): Promise<string[]> {
  const answer = await node.admin('GET', '/cluster/layout');
  if (answer.status !== 200)
    throw new Error(`layout: ${answer.status} ${JSON.stringify(answer.json)}`);
  const partitions = answer.json['partitions'] as Array<{ replicas: string[] }>;
  return partitions[partitionOf(bucketId)]?.replicas ?? [];
}
