// This node's etcd member, run as a child process of `lightwell serve` (docs/cluster.md §3).
//
// The member's name is the Lightwell node id, its data lives in `<data>/cluster/etcd`, and its
// flags are fixed here: compaction, backend quota, snapshot interval, timeouts and the strict
// reconfiguration check, so that no operator has to remember them. `--initial-cluster*` matter
// only on the member's first start; etcd ignores them once its data directory exists.
//
// A member left running by a supervisor that was killed (SIGKILL leaves its children behind)
// would hold the ports and the data directory: its pid is kept in `<etcd data>.pid`, and a start
// first kills that process when it is still an etcd on this data directory.
//
// A member that exits is restarted with backoff, unless this node was removed from the cluster
// (etcd then exits on its own and must stay down) or the supervisor is stopping.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { Unavailable } from '../util/errors.js';
import type { Logger } from '../util/log.js';

const BACKOFF_MS_MAX = 10_000;
const STOP_MS_MAX = 15_000;

export interface EtcdMemberOptions {
  readonly bin: string;
  readonly name: string;
  readonly dataDir: string;
  readonly clientUrl: string;
  readonly peerUrl: string;
  readonly initialCluster: string;
  readonly initialState: 'new' | 'existing';
  readonly token: string;
  readonly log: Logger;
}

/** The command line of the member (also shown in docs/cluster.md §3). */
export function etcdArgs(options: EtcdMemberOptions): string[] {
  return [
    '--name',
    options.name,
    '--data-dir',
    options.dataDir,
    '--listen-client-urls',
    options.clientUrl,
    '--advertise-client-urls',
    options.clientUrl,
    '--listen-peer-urls',
    options.peerUrl,
    '--initial-advertise-peer-urls',
    options.peerUrl,
    '--initial-cluster',
    options.initialCluster,
    '--initial-cluster-state',
    options.initialState,
    '--initial-cluster-token',
    options.token,
    '--auto-compaction-mode',
    'periodic',
    '--auto-compaction-retention',
    '1h',
    '--quota-backend-bytes',
    String(2 * 1024 ** 3),
    '--snapshot-count',
    '10000',
    '--heartbeat-interval',
    '100',
    '--election-timeout',
    '1000',
    '--strict-reconfig-check',
    '--logger',
    'zap',
    '--log-outputs',
    'stderr',
    '--log-level',
    'warn',
  ];
}

export class EtcdMember {
  private child: ChildProcess | undefined;
  private stopping = false;
  private backoffMs = 200;
  private restartTimer: NodeJS.Timeout | undefined;
  /** Set when the member must stay down (its node was removed from the cluster). */
  private retired = false;

  constructor(private readonly options: EtcdMemberOptions) {}

  /** Starts the process; resolves once it has been spawned (not once it serves). */
  async start(): Promise<void> {
    await mkdir(this.options.dataDir, { recursive: true, mode: 0o700 });
    await this.killLeftover();
    await this.spawnOnce();
  }

  private get pidFile(): string {
    return `${this.options.dataDir}.pid`;
  }

  /** Kills an etcd on this data directory left by a supervisor that died without stopping it. */
  private async killLeftover(): Promise<void> {
    const pid = Number((await readFile(this.pidFile, 'utf8').catch(() => '')).trim());
    if (!Number.isSafeInteger(pid) || pid <= 0) return;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (!cmdline.includes(`\0--data-dir\0${this.options.dataDir}\0`)) return;
    this.options.log.warn({ pid }, 'an etcd member left running on this data directory: killed');
    process.kill(pid, 'SIGKILL');
    for (let waited = 0; waited < 10_000; waited += 50) {
      if (!(await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => ''))) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  private spawnOnce(): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.options.bin, etcdArgs(this.options), {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      this.child = child;
      const startedAt = Date.now();
      child.once('spawn', () => {
        writeFile(this.pidFile, `${String(child.pid)}\n`).then(resolve, reject);
      });
      child.once('error', (error: NodeJS.ErrnoException) => {
        this.child = undefined;
        reject(
          Unavailable(
            `cannot run etcd (${this.options.bin}: ${error.code ?? error.message}); install ` +
              "Debian's etcd-server or set cluster.etcd_bin",
          ),
        );
      });
      child.once('exit', (code, signal) => {
        if (this.child === child) this.child = undefined;
        if (this.stopping || this.retired) return;
        if (Date.now() - startedAt > 30_000) this.backoffMs = 200;
        this.options.log.error(
          { exit: String(signal ?? code), restartInMs: this.backoffMs },
          'etcd member exited; restarting',
        );
        const delay = this.backoffMs;
        this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MS_MAX);
        this.restartTimer = setTimeout(() => {
          if (!this.stopping && !this.retired)
            this.spawnOnce().catch((error: unknown) =>
              this.options.log.error({ err: error }, 'etcd member did not restart'),
            );
        }, delay);
      });
    });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The node left the cluster: its member stops and is not restarted. */
  async retire(): Promise<void> {
    this.retired = true;
    await this.stop();
  }

  /** No restart from now on (the node is stopping). */
  hold(): void {
    this.stopping = true;
    clearTimeout(this.restartTimer);
  }

  async stop(): Promise<void> {
    this.hold();
    clearTimeout(this.restartTimer);
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_MS_MAX);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill('SIGTERM');
    });
  }
}
