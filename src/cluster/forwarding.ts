// Writes through any member, ordered by their partition's leader (docs/cluster.md §8, "Writes
// through any node"). A node that receives an object write (PUT, DELETE, tags, retention, legal
// hold, each multipart step, a copy) for a bucket whose partition another member leads does not
// coordinate it: it forwards the engine command to the leader over the data transport (signed
// with the cluster secret, never the client's credentials), and the leader runs it as the one
// writer of the partition: its rules, conditions, quota and idempotency, the sequence, the
// metadata turn, and the replication to a majority (replication.ts, replicated-commands.ts).
//
// - Who checks what: the receiving node has authenticated and authorised the request (keys,
//   policies and buckets are cluster-wide records every member holds, shared-state.ts); the
//   leader runs the engine's own rules, which read the object's state, where the partition's
//   writes are ordered. The audit row of the write is the leader's.
// - Bodies: the receiving node's upload pipeline has stored the body in its own segments as it
//   arrived; its chunk records are then sent to the leader in batches of DATA_BATCH_BYTES (read
//   back from the segments, never held whole), verified and fsync'ed there, and the command names
//   them by id.
// - Leader changes: a forward carries the epoch its sender knows; a member that does not lead the
//   partition (any more) refuses it with `stale_epoch` before it runs anything (a sender placing
//   by an older layout than the leader's, with `stale_layout`: it reads the layout and sends the
//   write to the leader again), and so does an
//   unreachable leader refuse by not answering at all (the connection refused). Both are sent
//   again, once, to the leader read afresh from etcd. Any other failure of the call (a timeout, a
//   connection cut after the command was sent) is ambiguous: the command is sent again, once,
//   only to the same leader with the same request id, which the leader remembers
//   (FORWARDS_REMEMBERED, for FORWARD_MEMORY_MS) and answers with the first run's outcome instead
//   of running it twice; when the leader changed meanwhile the client gets 503 `unavailable`
//   with Retry-After, as for any write whose outcome is unknown. A 2xx therefore still means
//   durable on a majority, and no write runs twice.
// - A partition nobody has led yet (a cluster moments old) or led by this node is coordinated
//   here, as before forwarding. A write whose leader's port refuses connections (it is down) is
//   answered 503 with Retry-After until a new leader is read, at most its lease (10 s) and a poll
//   later: only a partition's leader writes it, so that no two nodes ever do (docs/cluster.md
//   §8, "Strict single writer"). A leader that is up but does not answer (frozen, cut off)
//   makes the write 503 too, since it may still be writing.
// - A refusal after which nothing ran (the leadership moving after a layout change, a leader
//   whose port refuses) is tried again, the view read afresh, for up to LEADER_SETTLE_MS (5 s)
//   before the client gets the 503: a handover takes a poll or two. A leader whose own lease
//   read is overdue reads it afresh once before it refuses.

import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ManifestChunk } from '../engine/ops/objects.js';
import {
  BadRequest,
  Fenced,
  StaleEpoch,
  StaleLayout,
  Unavailable,
  errorCode,
  fromWire,
  isLightwellError,
  toWire,
} from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { counterOf } from '../util/metrics.js';
import type { Registry } from 'prom-client';
import { partitionOf } from './layout.js';
import { dataAddressOf, type DataHandler } from './data-transport.js';
import { REPLICATED_COMMANDS } from './replicated-commands.js';
import type { ClusterView, Replicator } from './replication.js';

const FORWARD_PATH = '/cluster/v1/data/forward';
/** The engine commands a member forwards to the leader of their bucket's partition. */
export const FORWARDED_COMMANDS: ReadonlySet<string> = new Set([
  'putObject',
  'deleteObject',
  ...REPLICATED_COMMANDS,
]);
/** Commands whose arguments name chunks this node stored: their records go to the leader first. */
const CARRIES_CHUNKS: ReadonlySet<string> = new Set(['putObject', 'uploadPart']);
/** A forwarded command's leader replicates it before it answers: a big part takes a while. */
const FORWARD_MS_MAX = 60_000;
/** Outcomes of forwarded commands a leader keeps, so that a resend does not run one twice. */
const FORWARDS_REMEMBERED = 4096;
const FORWARD_MEMORY_MS = 10 * 60_000;
/** Member states whose forwards a leader refuses (as replication.ts refuses their writes). */
const FENCED_STATES: ReadonlySet<string> = new Set(['lost', 'removed']);
/** How long a write refused by a moving leadership is tried again before the client hears. */
const LEADER_SETTLE_MS = 5_000;
const SETTLE_PAUSE_MS = 100;
const SETTLE_PAUSE_MS_MAX = 1_000;
/** How long a settling try waits for a fresh read of the view (etcd may have no majority). */
const SETTLE_READ_MS = 1_000;

/** What a forwarded command's leader answers: the result, or the error as it was raised. */
type Outcome = { ok: true; result: unknown } | { ok: false; error: ReturnType<typeof toWire> };

export class Forwarder {
  /** Outcomes by `<sender>/<request id>`, oldest first. */
  private readonly outcomes = new Map<string, { at: number; outcome: Promise<Outcome> }>();
  /** Figures on `/metrics` (replication.ts registers them). */
  readonly figures = { forwarded: 0, resent: 0, led: 0, repeats: 0 };

  constructor(
    private readonly replicator: Replicator,
    private readonly view: ClusterView,
    /** Runs a command as its partition's writer (the router's own path). */
    private readonly coordinate: (name: string, args: Record<string, unknown>) => Promise<unknown>,
    private readonly log: Logger,
    registry: Registry,
  ) {
    const figures: Array<[string, string, () => number]> = [
      [
        'lightwell_cluster_writes_forwarded_total',
        "Writes this node forwarded to their partition's leader",
        () => this.figures.forwarded,
      ],
      [
        'lightwell_cluster_forwards_resent_total',
        'Forwarded writes sent again once (a new leader, or the same one after a lost answer)',
        () => this.figures.resent,
      ],
      [
        'lightwell_cluster_forwards_led_total',
        'Writes other nodes forwarded that this node ran as their partition leader',
        () => this.figures.led,
      ],
      [
        'lightwell_cluster_forwards_repeated_total',
        'Forwards received again with a request id already run, answered without running again',
        () => this.figures.repeats,
      ],
    ];
    for (const [name, help, read] of figures) {
      registry.removeSingleMetric(name);
      counterOf(registry, name, help, read);
    }
  }

  handlers(): Map<string, DataHandler> {
    return new Map<string, DataHandler>([[FORWARD_PATH, (from, body) => this.accept(from, body)]]);
  }

  /**
   * Runs `name` here when this node leads its bucket's partition, else at the leader. A refusal
   * that ran nothing (a leadership moving after a layout change, a leader whose port refuses
   * while a new one takes over) is tried again, the view read afresh, for up to
   * LEADER_SETTLE_MS before the client gets it (503 with Retry-After): a leadership handover
   * takes a poll or two, and a client should not see each one.
   */
  async run(name: string, args: Record<string, unknown>): Promise<unknown> {
    const { bucket } = this.replicator.bucketOf(args);
    const partition = partitionOf(bucket.id);
    const settleBy = Date.now() + LEADER_SETTLE_MS;
    for (let pause = SETTLE_PAUSE_MS; ; pause = Math.min(pause * 2, SETTLE_PAUSE_MS_MAX)) {
      const outcome = await this.runOnce(name, args, partition);
      if (outcome.refused === undefined) return outcome.value;
      if (Date.now() + pause >= settleBy) throw settleFailed(partition, outcome.refused);
      await sleep(pause);
      await settledRead(this.view);
    }
  }

  /** One try of `run`: its answer, or a refusal after which nothing ran anywhere. */
  private async runOnce(
    name: string,
    args: Record<string, unknown>,
    partition: number,
  ): Promise<{ value?: unknown; refused?: Error }> {
    const leader = this.view.leaderOf(partition);
    if (leader === undefined) return { value: await this.coordinate(name, args) };
    if (leader.nodeId === this.view.nodeId) {
      // Before anything runs: a leader unsure of its own lease writes nothing (cluster-view.ts).
      try {
        await freshWriteEpoch(this.view, partition);
      } catch (error) {
        return { refused: error as Error };
      }
      return { value: await this.coordinate(name, args) };
    }
    this.replicator.requireQuorum();
    const requestId = randomUUID();
    this.figures.forwarded += 1;
    try {
      return { value: await this.forwardTo(leader.nodeId, partition, { name, args, requestId }) };
    } catch (error) {
      let retry: string | undefined;
      try {
        retry = await this.retryTarget(error, leader.nodeId, partition);
      } catch (thrown) {
        if (ranNothing(error)) return { refused: thrown as Error };
        throw thrown;
      }
      if (retry === undefined) {
        if (ranNothing(error)) return { refused: error as Error };
        throw error;
      }
      this.figures.resent += 1;
      this.log.info(
        { name, partition, from: leader.nodeId, to: retry, reason: errorCode(error) },
        'a forwarded write is sent again',
      );
      if (retry === this.view.nodeId) return { value: await this.coordinate(name, args) };
      try {
        return { value: await this.forwardTo(retry, partition, { name, args, requestId }) };
      } catch (again) {
        // Refused outright, with nothing run: a next try goes under a new request id.
        if (ranNothing(again) && ranNothing(error)) return { refused: again as Error };
        throw again;
      }
    }
  }

  /**
   * Where a failed forward may go again, once (see the header): the new leader after a refusal
   * that ran nothing, the same leader (same request id) after an ambiguous failure; undefined
   * when it must not be sent again (the leader answered, or changed after an ambiguous failure).
   */
  private async retryTarget(
    error: unknown,
    leaderId: string,
    partition: number,
  ): Promise<string | undefined> {
    const code = errorCode(error);
    const refused = code === 'stale_epoch' || code === 'stale_layout' || notDelivered(error);
    const ambiguous = !refused && unreached(error);
    if (!refused && !ambiguous) return undefined;
    await this.view.refresh();
    const now = this.view.leaderOf(partition);
    // A leader that refused a stale layout ran nothing: it may be sent the write again.
    if (refused && now !== undefined && (now.nodeId !== leaderId || code === 'stale_layout'))
      return now.nodeId;
    // A leader whose port refuses connections is down, its lease not expired yet: no other
    // node may write the partition until a new leader takes it (see the header).
    if (notDelivered(error))
      throw Unavailable(
        `the leader of partition ${partition}, ${leaderId}, is not reachable and its lease has ` +
          'not expired yet; a new leader takes the partition within seconds: retry',
        { retryAfterSeconds: 2 },
        { cause: error },
      );
    if (refused) return undefined;
    // Cut off from etcd (a minority side), this node cannot tell who leads: it sends nothing more.
    this.replicator.requireQuorum();
    if (now?.nodeId === leaderId) return leaderId;
    throw Unavailable(
      `the leader of partition ${partition} changed while it was sent this write, which may or ` +
        'may not have been made; read the object, or retry',
    );
  }

  private async forwardTo(
    leaderId: string,
    partition: number,
    command: { name: string; args: Record<string, unknown>; requestId: string },
  ): Promise<unknown> {
    const member = this.view.addressOf(leaderId);
    if (member === undefined) throw Unavailable(`the leader ${leaderId} has no address`);
    const address = dataAddressOf(member);
    const { tenant, bucket } = this.replicator.bucketOf(command.args);
    let args = command.args;
    if (CARRIES_CHUNKS.has(command.name)) {
      const chunks = args['chunks'] as ManifestChunk[];
      // A replica commits this copy when the leader's write comes back to it (not a second one).
      if (this.replicator.replicaIds(bucket).includes(this.view.nodeId))
        this.replicator.holdOwn(tenant.num, chunks);
      await this.replicator.sendRecords(address, tenant, chunks);
      args = { ...args, chunks: chunks.map((c) => ({ id: c.id, plainLength: c.plainLength })) };
    }
    const answer = await this.replicator.call(
      address,
      'forward',
      {
        name: command.name,
        args,
        requestId: command.requestId,
        partition,
        epoch: this.view.leaderOf(partition)?.epoch ?? 0,
      },
      FORWARD_MS_MAX,
    );
    const outcome = answer as unknown as Outcome;
    if (outcome.ok) return outcome.result;
    throw fromWire(outcome.error);
  }

  // ---- the leader's side --------------------------------------------------------------------

  private async accept(from: string, body: Record<string, unknown>): Promise<Outcome> {
    const { name, args, requestId, partition } = body;
    if (
      typeof name !== 'string' ||
      !FORWARDED_COMMANDS.has(name) ||
      args === null ||
      typeof args !== 'object' ||
      typeof requestId !== 'string' ||
      requestId.length > 64 ||
      typeof partition !== 'number'
    )
      throw BadRequest('forward takes {name, args, requestId, partition, epoch}');
    if (this.view.stateOf(from) === undefined) await this.view.refresh();
    const state = this.view.stateOf(from);
    if (state === undefined || FENCED_STATES.has(state))
      throw Fenced(`node ${from} is ${state ?? 'not a member'}: its forwards are refused`);
    const id = `${from}/${requestId}`;
    const held = this.outcomes.get(id);
    if (held !== undefined) {
      this.figures.repeats += 1;
      return held.outcome;
    }
    await this.requireLeader(from, partition);
    // A sender placing by an older layout learns of the newer one, and sends again.
    const placedBy = body['layout'];
    if (typeof placedBy === 'number' && placedBy < this.view.layoutVersion())
      throw StaleLayout(
        `node ${from} forwarded this write under layout ${placedBy}; this node has seen ` +
          `layout ${this.view.layoutVersion()}`,
      );
    const run = args as Record<string, unknown>;
    const outcome = this.lead(name, run);
    this.remember(id, outcome);
    return outcome;
  }

  /** Refuses, before anything runs, a forward for a partition this node does not lead. */
  private async requireLeader(from: string, partition: number): Promise<void> {
    if (!Number.isInteger(partition)) throw BadRequest('forward names a partition');
    if (this.view.leaderOf(partition)?.nodeId !== this.view.nodeId) await this.view.refresh();
    const leader = this.view.leaderOf(partition);
    if (leader?.nodeId !== this.view.nodeId)
      throw StaleEpoch(
        `node ${from} forwarded a write of partition ${partition} to ${this.view.nodeId}, ` +
          `which does not lead it (its leader is ${leader?.nodeId ?? 'unknown'})`,
      );
    await freshWriteEpoch(this.view, partition);
  }

  private async lead(name: string, args: Record<string, unknown>): Promise<Outcome> {
    this.figures.led += 1;
    try {
      const { tenant } = this.replicator.bucketOf(args);
      const run = CARRIES_CHUNKS.has(name)
        ? { ...args, chunks: this.replicator.located(tenant.num, args['chunks']) }
        : args;
      if (name === 'copyObject') await this.freshenSource(args);
      const result = await this.coordinate(name, run);
      if (CARRIES_CHUNKS.has(name))
        this.replicator.forget(tenant.num, run['chunks'] as ManifestChunk[]);
      return { ok: true, result };
    } catch (error) {
      if (!isLightwellError(error)) throw error;
      return { ok: false, error: toWire(error) };
    }
  }

  /**
   * A copy reads its source here: the source's current version is first made as new as a
   * majority of its replicas hold it (this node may be no replica of the source's bucket). A
   * source named by version id is read from this node's copy.
   */
  private async freshenSource(args: Record<string, unknown>): Promise<void> {
    const { tenantId, sourceBucket, sourceKey, sourceVersionId } = args;
    if (typeof sourceVersionId === 'string') return;
    if (typeof tenantId !== 'string' || typeof sourceBucket !== 'string') return;
    if (typeof sourceKey !== 'string') return;
    await this.replicator.freshen({ tenantId, bucket: sourceBucket, key: sourceKey });
  }

  private remember(id: string, outcome: Promise<Outcome>): void {
    const now = Date.now();
    for (const [held, { at }] of this.outcomes) {
      if (this.outcomes.size < FORWARDS_REMEMBERED && now - at < FORWARD_MEMORY_MS) break;
      this.outcomes.delete(held);
    }
    this.outcomes.set(id, { at: now, outcome });
    // A run that threw past the outcome (not a Lightwell error) is not kept: it is a fault here.
    outcome.catch(() => this.outcomes.delete(id));
  }
}

/** The call never reached the node (nothing was sent): refused or unresolvable connection. */
/**
 * What the client hears of a refusal that outlasted LEADER_SETTLE_MS: its own words when it is
 * already an `unavailable` the client is shown, else that the leadership is moving (a stale
 * epoch or layout is an internal word), with Retry-After either way.
 */
function settleFailed(partition: number, refused: Error): Error {
  if (errorCode(refused) === 'unavailable') return refused;
  return Unavailable(
    `the leadership of partition ${partition} is moving and did not settle within ` +
      `${LEADER_SETTLE_MS / 1000} s; retry (${refused.message})`,
    { retryAfterSeconds: 2 },
    { cause: refused },
  );
}

/** A refusal after which the leader ran nothing: it may be sent again, anywhere. */
function ranNothing(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'stale_epoch' || code === 'stale_layout' || notDelivered(error);
}

/**
 * The epoch this node writes `partition` under as its leader; when its own lease read is
 * overdue (a loaded node's poll lags), the view is read once more first, which reads the lease's
 * time left afresh, before the refusal stands.
 */
async function freshWriteEpoch(view: ClusterView, partition: number): Promise<number> {
  try {
    return view.writeEpoch(partition);
  } catch (error) {
    if (errorCode(error) !== 'unavailable') throw error;
    await settledRead(view);
    return view.writeEpoch(partition);
  }
}

/**
 * A fresh read of the view, waited for at most SETTLE_READ_MS and never failing: without etcd's
 * majority a read hangs or fails, and the refusal at hand then stands as it is.
 */
async function settledRead(view: ClusterView): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, SETTLE_READ_MS)));
  await Promise.race([view.refresh().catch(() => undefined), late]);
  clearTimeout(timer);
}

function notDelivered(error: unknown): boolean {
  if (!isLightwellError(error) || error.code !== 'unavailable') return false;
  const code = causeCode(error);
  return code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH';
}

/** The call failed on the way (a timeout, a cut connection): the node may have run it. */
function unreached(error: unknown): boolean {
  return (
    isLightwellError(error) && error.code === 'unavailable' && /not reachable/.test(error.message)
  );
}

function causeCode(error: Error): string | undefined {
  let cause: unknown = error.cause;
  for (let depth = 0; depth < 4 && cause !== undefined && cause !== null; depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    cause = (cause as { cause?: unknown }).cause;
  }
  return undefined;
}
