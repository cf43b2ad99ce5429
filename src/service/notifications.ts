// Bucket event notifications (data-api.md §4, spec/DECISIONS.md "Notification config"): the
// webhook configs of a bucket and their delivery status, whatever the transport renders of them.
//
// A PUT validates the configs (sns, sqs and lambda answer 501), refuses targets on loopback,
// link-local and private addresses unless private targets are allowed (host names resolved),
// and answers `signingSecret` once for each config id that is new; the engine generates and
// seals it. A read never shows a secret, only `hasSecret`. Who may do this (the admin scope on
// the bucket) is the caller's `Access.bucket(…, {verb: 'admin'})`.

import {
  bucketKeyPrefix,
  decodeOutboxKey,
  outboxQueueRange,
  DB,
  type BucketRecord,
  type OutboxRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import { checkWebhookTarget } from '../engine/delivery.js';
import {
  configView,
  notificationsOf,
  parseNotificationConfigs,
  statusOf,
  NOTIFICATION_CONFIGS_MAX,
  NOTIFICATION_EVENT_TYPES,
  type NotificationConfigView,
} from '../engine/ops/notifications.js';
import type { RequestContext } from './context.js';
import { commitBucketChange, type ObjectService } from './objects.js';

export { NOTIFICATION_CONFIGS_MAX, NOTIFICATION_EVENT_TYPES };
export type { NotificationConfigView };

/** A stored config as a PUT answers it: with its signing secret when its id is new. */
export type StoredNotificationConfig = NotificationConfigView & { signingSecret?: string };

/** Where one target's queue stands: its oldest pending event. */
export interface TargetQueueHead {
  readonly configId: string;
  readonly headEventId: string;
  readonly attempts: number;
  readonly nextAttemptAt: number;
  readonly lastAttemptAt?: number;
  readonly lastError?: string;
}

/** The delivery state of a bucket's events; times in milliseconds since the epoch. */
export interface DeliveryStatus {
  readonly pending: number;
  readonly delivered: number;
  readonly failedAttempts: number;
  readonly discarded: number;
  readonly lastError?: string;
  readonly lastErrorAt?: number;
  readonly lastDeliveredAt?: number;
  readonly targets: TargetQueueHead[];
}

/** The bucket's configs, without secrets (empty when it has none). */
export function notificationConfigs(
  store: IndexStore,
  bucket: BucketRecord,
): NotificationConfigView[] {
  return (notificationsOf(store, bucket.id)?.configs ?? []).map(configView);
}

/** Replaces the bucket's configs with `body`'s (`{configs: [...]}`; an empty list clears). */
export async function putNotificationConfigs(
  objects: Pick<ObjectService, 'commit'>,
  ctx: RequestContext,
  bucket: BucketRecord,
  body: unknown,
  allowPrivateTargets: boolean,
): Promise<StoredNotificationConfig[]> {
  const configs = parseNotificationConfigs(body);
  for (const config of configs) await checkWebhookTarget(new URL(config.url), allowPrivateTargets);
  const stored = await commitBucketChange(
    objects,
    ctx,
    bucket,
    'putBucketNotifications',
    { configs },
    200,
  );
  return stored.configs.map((config) => {
    const secret = stored.secrets[config.id];
    return secret === undefined ? config : { ...config, signingSecret: secret };
  });
}

/** Clears the bucket's configs; the pending events of removed configs are discarded. */
export async function deleteNotificationConfigs(
  objects: Pick<ObjectService, 'commit'>,
  ctx: RequestContext,
  bucket: BucketRecord,
): Promise<void> {
  await commitBucketChange(objects, ctx, bucket, 'deleteBucketNotifications', {}, 204);
}

/** The bucket's delivery counters and the head of each target's queue, by config id. */
export function deliveryStatus(store: IndexStore, bucketId: number): DeliveryStatus {
  const status = statusOf(store, bucketId);
  const result: {
    -readonly [K in keyof DeliveryStatus]: DeliveryStatus[K];
  } = {
    pending: status?.pending ?? 0,
    delivered: status?.delivered ?? 0,
    failedAttempts: status?.failedAttempts ?? 0,
    discarded: status?.discarded ?? 0,
    targets: [],
  };
  if (status?.lastError !== undefined) result.lastError = status.lastError;
  if (status?.lastErrorAt !== undefined) result.lastErrorAt = status.lastErrorAt;
  if (status?.lastDeliveredAt !== undefined) result.lastDeliveredAt = status.lastDeliveredAt;
  result.targets = queueHeads(store, bucketId);
  return result;
}

/** The oldest event of each target queue: one look-up per queue, skipping past the rest. */
function queueHeads(store: IndexStore, bucketId: number): TargetQueueHead[] {
  const heads: TargetQueueHead[] = [];
  const prefix = bucketKeyPrefix(bucketId);
  const end = Buffer.concat([prefix, Buffer.from([0xff])]);
  let start = prefix;
  for (;;) {
    let head: { key: Buffer; value: OutboxRecord } | undefined;
    for (const entry of store.range<OutboxRecord>(DB.outbox, { start, end, limit: 1 }))
      head = entry;
    if (!head) break;
    const { configId } = decodeOutboxKey(head.key);
    start = outboxQueueRange(bucketId, configId).end;
    const { event, attempts, nextAttemptAt, lastAttemptAt, lastError } = head.value;
    heads.push({
      configId,
      headEventId: event.id,
      attempts,
      nextAttemptAt,
      ...(lastAttemptAt === undefined ? {} : { lastAttemptAt }),
      ...(lastError === undefined ? {} : { lastError }),
    });
  }
  return heads;
}
