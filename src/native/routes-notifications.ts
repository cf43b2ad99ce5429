// Bucket event notifications (data-api.md §4, spec/DECISIONS.md "Notification config"):
// GET, PUT and DELETE of the webhook configs, and the delivery status. All need an
// admin-scoped key: a config sends the bucket's events to a URL of the caller's choosing.
//
// PUT validates the configs (sns, sqs and lambda answer 501), refuses targets on loopback,
// link-local and private addresses unless `notifications.allow_private_targets` (resolving host
// names), and returns `signingSecret` once for each config id that is new; the engine generates
// and seals it. GET never shows a secret, only `hasSecret`.

import type { Route, RouteDoc, JsonSchema } from '../http/router.js';
import type { Handler } from '../http/server.js';
import {
  DB,
  bucketKeyPrefix,
  decodeOutboxKey,
  outboxQueueRange,
  type BucketRecord,
  type OutboxRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import {
  parseNotificationConfigs,
  notificationsOf,
  configView,
  statusOf,
  NOTIFICATION_EVENT_TYPES,
  NOTIFICATION_CONFIGS_MAX,
  type NotificationConfigView,
} from '../engine/ops/notifications.js';
import { checkWebhookTarget } from '../engine/delivery.js';
import type { Principal } from '../service/auth.js';
import type { RouteKit } from './routes.js';
import type { Exchange } from '../http/exchange.js';

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const configSchema: JsonSchema = {
  type: 'object',
  required: ['id', 'type', 'url', 'events'],
  properties: {
    id: { ...str, description: 'generated when absent' },
    type: {
      type: 'string',
      enum: ['webhook', 'sns', 'sqs', 'lambda'],
      default: 'webhook',
      description: 'only webhook is implemented (others: 501)',
    },
    url: str,
    events: {
      type: 'array',
      minItems: 1,
      uniqueItems: true,
      items: { type: 'string', enum: [...NOTIFICATION_EVENT_TYPES] },
    },
    prefix: str,
    suffix: str,
    hasSecret: { type: 'boolean', readOnly: true, description: 'ignored in a PUT body' },
    signingSecret: {
      ...str,
      readOnly: true,
      description:
        'only in the PUT answer, once per new config id; the service generates it, and one in a PUT body is ignored (so an answer can be sent back)',
    },
  },
};
const configsSchema: JsonSchema = {
  type: 'object',
  required: ['configs'],
  properties: {
    configs: { type: 'array', maxItems: NOTIFICATION_CONFIGS_MAX, items: configSchema },
  },
};
/** What a PUT sends: `id` and `type` may be left out (generated, and webhook). */
const configsRequestSchema: JsonSchema = {
  type: 'object',
  required: ['configs'],
  properties: {
    configs: {
      type: 'array',
      maxItems: NOTIFICATION_CONFIGS_MAX,
      items: { ...configSchema, required: ['url', 'events'] },
    },
  },
};
const statusSchema: JsonSchema = {
  type: 'object',
  required: ['pending', 'delivered', 'failedAttempts', 'discarded', 'targets'],
  properties: {
    pending: int,
    delivered: int,
    failedAttempts: int,
    discarded: int,
    lastError: str,
    lastErrorAt: time,
    lastDeliveredAt: time,
    targets: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          configId: str,
          headEventId: str,
          attempts: int,
          nextAttemptAt: time,
          lastAttemptAt: time,
          lastError: str,
        },
      },
    },
  },
};
const doc = (
  summary: string,
  responses: RouteDoc['responses'],
  extra: Partial<RouteDoc> = {},
): RouteDoc => ({
  summary: `${summary} (an access key with the admin scope on the bucket)`,
  auth: 'bearer',
  tags: ['notifications'],
  responses,
  ...extra,
});

export function notificationRoutes(kit: RouteKit): Route<Handler>[] {
  const { services, bearer, access, mutate } = kit;
  const { store, settings } = services;
  const adminBucket = (
    exchange: Exchange,
    params: Readonly<Record<string, string>>,
  ): { principal: Principal; bucket: BucketRecord } => {
    const principal = bearer(exchange);
    return {
      principal,
      bucket: access.bucket(principal, params['bucket'] ?? '', { verb: 'admin' }),
    };
  };
  return [
    {
      method: 'GET',
      path: '/buckets/{bucket}/notifications',
      operationId: 'getBucketNotifications',
      doc: doc('Read the notification configs (never the secrets)', {
        200: { description: 'configs', schema: configsSchema },
      }),
      handler: (exchange, params) => {
        const { bucket } = adminBucket(exchange, params);
        exchange.sendJson(200, {
          configs: (notificationsOf(store, bucket.id)?.configs ?? []).map(configView),
        });
      },
    },
    {
      method: 'PUT',
      path: '/buckets/{bucket}/notifications',
      operationId: 'setBucketNotifications',
      doc: doc(
        'Replace the notification configs; an empty list clears them',
        { 200: { description: 'configs, with signingSecret for new ids', schema: configsSchema } },
        { requestBody: { contentType: 'application/json', schema: configsRequestSchema } },
      ),
      handler: async (exchange, params) => {
        const { principal, bucket } = adminBucket(exchange, params);
        const configs = parseNotificationConfigs(await exchange.readJson());
        const allowPrivate = settings.bool('notifications.allow_private_targets');
        for (const config of configs) await checkWebhookTarget(new URL(config.url), allowPrivate);
        const stored = await mutate<{
          configs: NotificationConfigView[];
          secrets: Record<string, string>;
        }>(
          exchange,
          'putBucketNotifications',
          { tenantId: principal.tenant.id, bucket: bucket.name, configs },
          200,
        );
        exchange.sendJson(200, {
          configs: stored.configs.map((config) => {
            const secret = stored.secrets[config.id];
            return secret === undefined ? config : { ...config, signingSecret: secret };
          }),
        });
      },
    },
    {
      method: 'DELETE',
      path: '/buckets/{bucket}/notifications',
      operationId: 'deleteBucketNotifications',
      doc: doc('Clear the notification configs (pending events of removed configs are discarded)', {
        204: { description: 'cleared' },
      }),
      handler: async (exchange, params) => {
        const { principal, bucket } = adminBucket(exchange, params);
        await mutate(
          exchange,
          'deleteBucketNotifications',
          { tenantId: principal.tenant.id, bucket: bucket.name },
          204,
        );
        exchange.send(204, {});
      },
    },
    {
      method: 'GET',
      path: '/buckets/{bucket}/notifications/status',
      operationId: 'getBucketNotificationStatus',
      doc: doc(
        'Delivery state: pending events, failed attempts, last error, and the head of each target queue',
        { 200: { description: 'status', schema: statusSchema } },
      ),
      handler: (exchange, params) => {
        const { bucket } = adminBucket(exchange, params);
        exchange.sendJson(200, deliveryStatus(store, bucket.id));
      },
    },
  ];
}

function deliveryStatus(store: IndexStore, bucketId: number): Record<string, unknown> {
  const status = statusOf(store, bucketId);
  const iso = (ms: number | undefined): string | undefined =>
    ms === undefined ? undefined : new Date(ms).toISOString();
  const json: Record<string, unknown> = {
    pending: status?.pending ?? 0,
    delivered: status?.delivered ?? 0,
    failedAttempts: status?.failedAttempts ?? 0,
    discarded: status?.discarded ?? 0,
  };
  if (status?.lastError !== undefined) json['lastError'] = status.lastError;
  if (status?.lastErrorAt !== undefined) json['lastErrorAt'] = iso(status.lastErrorAt);
  if (status?.lastDeliveredAt !== undefined) json['lastDeliveredAt'] = iso(status.lastDeliveredAt);
  const targets: Record<string, unknown>[] = [];
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
    const target: Record<string, unknown> = {
      configId,
      headEventId: head.value.event.id,
      attempts: head.value.attempts,
      nextAttemptAt: iso(head.value.nextAttemptAt),
    };
    if (head.value.lastAttemptAt !== undefined)
      target['lastAttemptAt'] = iso(head.value.lastAttemptAt);
    if (head.value.lastError !== undefined) target['lastError'] = head.value.lastError;
    targets.push(target);
  }
  json['targets'] = targets;
  return json;
}
