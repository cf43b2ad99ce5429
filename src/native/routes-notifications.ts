// Bucket event notifications (data-api.md §4, spec/DECISIONS.md "Notification config"):
// GET, PUT and DELETE of the webhook configs, and the delivery status, as JSON. All need an
// admin-scoped key: a config sends the bucket's events to a URL of the caller's choosing. The
// rules (validation, private targets, secrets once) are the service's (service/notifications.ts).

import type { Route, JsonSchema } from '../http/router.js';
import type { Handler } from '../http/server.js';
import type { BucketRecord } from '../engine/index/schema.js';
import type { Principal } from '../service/auth.js';
import { contextOf } from '../service/context.js';
import {
  deleteNotificationConfigs,
  deliveryStatus,
  notificationConfigs,
  putNotificationConfigs,
  NOTIFICATION_CONFIGS_MAX,
  NOTIFICATION_EVENT_TYPES,
  type DeliveryStatus,
} from '../service/notifications.js';
import type { RouteKit } from './routes.js';
import { bearerDocs } from './route-docs.js';
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
const doc = bearerDocs('notifications', ' (an access key with the admin scope on the bucket)');

export function notificationRoutes(kit: RouteKit): Route<Handler>[] {
  const { services, bearer, access, objects } = kit;
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
        exchange.sendJson(200, { configs: notificationConfigs(store, bucket) });
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
        const configs = await putNotificationConfigs(
          objects,
          contextOf(exchange, principal),
          bucket,
          await exchange.readJson(),
          settings.bool('notifications.allow_private_targets'),
        );
        exchange.sendJson(200, { configs });
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
        await deleteNotificationConfigs(objects, contextOf(exchange, principal), bucket);
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
        exchange.sendJson(200, statusJson(deliveryStatus(store, bucket.id)));
      },
    },
  ];
}

/** The delivery status as JSON: times as ISO 8601. */
function statusJson(status: DeliveryStatus): Record<string, unknown> {
  const iso = (ms: number): string => new Date(ms).toISOString();
  const json: Record<string, unknown> = {
    pending: status.pending,
    delivered: status.delivered,
    failedAttempts: status.failedAttempts,
    discarded: status.discarded,
  };
  if (status.lastError !== undefined) json['lastError'] = status.lastError;
  if (status.lastErrorAt !== undefined) json['lastErrorAt'] = iso(status.lastErrorAt);
  if (status.lastDeliveredAt !== undefined) json['lastDeliveredAt'] = iso(status.lastDeliveredAt);
  json['targets'] = status.targets.map((head) => {
    const target: Record<string, unknown> = {
      configId: head.configId,
      headEventId: head.headEventId,
      attempts: head.attempts,
      nextAttemptAt: iso(head.nextAttemptAt),
    };
    if (head.lastAttemptAt !== undefined) target['lastAttemptAt'] = iso(head.lastAttemptAt);
    if (head.lastError !== undefined) target['lastError'] = head.lastError;
    return target;
  });
  return json;
}
