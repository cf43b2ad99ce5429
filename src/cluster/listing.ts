// Listings on a cluster member (docs/cluster.md §8a, "Listings"): before a page of a bucket's
// objects is listed from this node's index, the node makes the page's range as new as a majority
// of the bucket's replicas hold it, so a listing on any node shows every acknowledged write and
// none of an acknowledged delete, whichever node took them.
//
// - Each other replica answers the first `limit` keys of the range (after the listing's position,
//   under its prefix) that it holds, with their newest sequence: a version's, or a tombstone's.
// - Once a majority of the replica set answered (this node counted when it is one), each key a
//   replica holds newer than this node is caught up here as a read catches it up: the newer
//   version is fetched (manifest, then verified record batches) and committed, a newer delete is
//   applied. Then the page is listed locally, and its continuation position is the local one.
// - Why `limit` keys are enough (the caller asks for one more than its page holds, so that the
//   page knows whether it is truncated): a key missing here that belongs on the page, or is the
//   one past it, has fewer than `limit` keys before it on the replica that holds it, so it is
//   among that replica's answer.
// - Bounded: at most LIST_FRESHEN_KEYS_MAX keys per replica and message; the catch-up copies
//   at most CATCH_UP_CONCURRENCY objects at once.

import { DB, objectKey, prefixRange, type ObjectVersionRecord } from '../engine/index/schema.js';
import type { LocalEngine } from '../engine/command-router.js';
import { BadRequest } from '../util/errors.js';
import type { DataHandler } from './data-transport.js';
import { HEAD_MS_MAX, majorityOf, tombKey, type Head, type Replicator } from './replication.js';

/** The most keys one replica answers for one page (the largest page of either API, and one). */
export const LIST_FRESHEN_KEYS_MAX = 1001;
const CATCH_UP_CONCURRENCY = 4;
const RANGE_PATH = '/cluster/v1/data/range';

export interface ListRange {
  readonly tenantId: string;
  readonly bucket: string;
  readonly prefix: string;
  /** The listing's position: keys strictly after it. */
  readonly after?: string;
  readonly limit: number;
}

type KeyHead = Head & { readonly key: string };

export class ListingFreshener {
  constructor(
    private readonly replicator: Replicator,
    private readonly local: LocalEngine,
  ) {}

  handlers(): Map<string, DataHandler> {
    return new Map<string, DataHandler>([
      [RANGE_PATH, (_from, body) => Promise.resolve({ heads: this.rangeHeads(parseRange(body)) })],
    ]);
  }

  /** Makes this node's copy of the range as new as a majority of the replicas' (see header). */
  async freshen(body: Record<string, unknown>): Promise<void> {
    const range = parseRange(body);
    const { replicator } = this;
    const { tenant, bucket } = replicator.bucketOf({ ...range });
    const replicas = replicator.replicaIds(bucket);
    const self = replicator.nodeId;
    const others = replicas.filter((id) => id !== self);
    const needed = majorityOf(replicas.length) - (replicas.includes(self) ? 1 : 0);
    if (others.length === 0) return;
    const answers = await replicator.gather(others, needed, (address) =>
      replicator.call(address, 'range', { ...range }, HEAD_MS_MAX),
    );
    const newest = new Map<string, { address: string; head: Head }>();
    for (const [address, answer] of answers)
      for (const head of answer['heads'] as KeyHead[]) {
        const best = newest.get(head.key);
        if (head.seq > (best?.head.seq ?? 0)) newest.set(head.key, { address, head });
      }
    const behind = [...newest].filter(
      ([key, { head }]) => head.seq > replicator.localHead(bucket, key).seq,
    );
    for (let start = 0; start < behind.length; start += CATCH_UP_CONCURRENCY)
      await Promise.all(
        behind.slice(start, start + CATCH_UP_CONCURRENCY).map(async ([key, { address, head }]) => {
          replicator.observe(head.seq);
          const args = { tenantId: range.tenantId, bucket: range.bucket, key };
          if (head.deleted) await replicator.applyDelete(args, head.seq, Date.now());
          else await replicator.pull(address, tenant, args);
        }),
      );
  }

  /** This node's first `limit` keys of the range, each with its newest sequence. */
  private rangeHeads(range: ListRange): KeyHead[] {
    const { bucket } = this.replicator.bucketOf({ ...range });
    const { store } = this.local;
    store.refresh();
    const bounds = prefixRange(bucket.id, range.prefix);
    const start =
      range.after === undefined
        ? bounds.start
        : Buffer.concat([objectKey(bucket.id, range.after), Buffer.from([0])]);
    const heads = new Map<string, KeyHead>();
    for (const { value } of store.range<ObjectVersionRecord>(DB.objects, {
      start,
      end: bounds.end,
      limit: range.limit,
    }))
      heads.set(value.key, {
        key: value.key,
        seq: value.seq,
        deleted: value.deleteMarker === true,
      });
    const tombs = tombKey(bucket.id, '');
    const tombStart =
      range.after === undefined
        ? tombKey(bucket.id, range.prefix)
        : Buffer.concat([tombKey(bucket.id, range.after), Buffer.from([0])]);
    const tombEnd = Buffer.concat([tombKey(bucket.id, range.prefix), Buffer.from([0xff])]);
    for (const { key, value } of store.range<{ seq: number }>(DB.meta, {
      start: tombStart,
      end: tombEnd,
      limit: range.limit,
    })) {
      const name = key.subarray(tombs.length).toString('utf8');
      if (value.seq > (heads.get(name)?.seq ?? 0))
        heads.set(name, { key: name, seq: value.seq, deleted: true });
    }
    return [...heads.values()];
  }
}

function parseRange(body: Record<string, unknown>): ListRange {
  const { tenantId, bucket, prefix, after, limit } = body;
  if (
    typeof tenantId !== 'string' ||
    typeof bucket !== 'string' ||
    typeof prefix !== 'string' ||
    (after !== undefined && typeof after !== 'string') ||
    typeof limit !== 'number' ||
    !Number.isSafeInteger(limit) ||
    limit < 1 ||
    limit > LIST_FRESHEN_KEYS_MAX
  )
    throw BadRequest(
      `a range is {tenantId, bucket, prefix, after?, limit of 1 to ${LIST_FRESHEN_KEYS_MAX}}`,
    );
  return { tenantId, bucket, prefix, limit, ...(after === undefined ? {} : { after }) };
}
