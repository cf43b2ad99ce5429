// Bucket event notifications: the per-bucket webhook configs, and the durable outbox that the
// object commands write their events to, in their own transaction.
//
// Invariants:
// - An event exists exactly when its change committed: `recordObjectEvent` runs inside the
//   command's transaction (putObject, deleteObject, copyObject, completeMultipartUpload), so a
//   rolled-back command leaves no event and a committed one cannot lose its event.
// - One outbox row per (event, matching config), keyed `bucketId | configId | 0x00 | seq`:
//   `seq` comes from the engine-wide counter inside the transaction, so within a queue rows
//   sort in commit order. The delivery loop (src/engine/delivery.ts) sends only the head of
//   each queue and removes it only after a 2xx answer: at-least-once, in commit order per
//   bucket and target, and a failing target blocks only its own queue.
// - A signing secret is generated here, returned once (to the PUT that created its config id)
//   and stored only sealed (AES-256-GCM under the secret-seal key, AAD binding it to tenant,
//   bucket id and config id). A PUT that keeps a config id keeps its secret.
// - `outbox-status.pending` equals the number of outbox rows of the bucket: every transaction
//   that adds or removes rows adjusts it.
// - The config record is keyed by bucket id and outlives a deleted bucket until the bucket's
//   outbox has drained (the delivery loop removes it then), so the events of the last deletes
//   are still delivered. Events whose config id is gone are discarded and counted. A tenant
//   delete is the exception: its purge drops the rows, configs and status of every bucket of
//   the tenant (`dropBucketNotifications`), and the delivery loop sends nothing for a deleted
//   tenant meanwhile.
//
// Persists: `notifications`, `outbox`, `outbox-status` (docs/on-disk-format.md §5).

import { randomBytes } from 'node:crypto';
import {
  DB,
  bucketKeyPrefix,
  tenantChildKey,
  tenantKey,
  outboxKey,
  type BucketRecord,
  type TenantRecord,
  type BucketNotificationsRecord,
  type NotificationConfigRecord,
  type ObjectEventType,
  type ObjectEventRecord,
  type OutboxRecord,
  type OutboxStatusRecord,
} from '../index/schema.js';
import type { IndexStore } from '../index/store.js';
import { nextCounter, type EngineContext } from './context.js';
import { deriveKey, sealSecret, openSecret, PURPOSE_SECRET_SEAL } from '../../security/keys.js';
import { parseWebhookUrl } from '../../security/webhook-target.js';
import { refuseUnknownFields } from '../../security/names.js';
import { BadRequest, NotFound, NotImplemented, Forbidden } from '../../util/errors.js';

export const NOTIFICATION_CONFIGS_MAX = 100;
export const NOTIFICATION_ID_CHARS_MAX = 64;
export const NOTIFICATION_FILTER_CHARS_MAX = 1024;
export const NOTIFICATION_EVENT_TYPES: readonly ObjectEventType[] = [
  'object-created',
  'object-removed',
];
export const SIGNING_SECRET_PREFIX = 'whsec_';
const SIGNING_SECRET_BYTES = 32;
const UNSUPPORTED_TARGETS = ['sns', 'sqs', 'lambda'];
/** The fields of the configs body, and of one config. */
const CONFIGS_FIELDS: ReadonlySet<string> = new Set(['configs']);
const configFields = new Set([
  'id',
  'type',
  'url',
  'events',
  'prefix',
  'suffix',
  'hasSecret',
  'signingSecret',
]);

/** A validated config as a client sends it. */
export interface NotificationConfigInput {
  id: string;
  type: 'webhook';
  url: string;
  events: ObjectEventType[];
  prefix?: string;
  suffix?: string;
}

/** A config as the API shows it: never the secret. */
export interface NotificationConfigView extends NotificationConfigInput {
  hasSecret: boolean;
}

/**
 * Validates a PUT body `{configs: [...]}`. Non-webhook targets answer 501 `not_implemented`;
 * a config without an id gets a generated one (`cfg-` and 12 hex digits).
 */
export function parseNotificationConfigs(body: unknown): NotificationConfigInput[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw BadRequest('the body must be {configs: [...]}');
  const fields = body as Record<string, unknown>;
  refuseUnknownFields(fields, CONFIGS_FIELDS);
  const configs = fields['configs'];
  if (!Array.isArray(configs) || configs.length > NOTIFICATION_CONFIGS_MAX) {
    throw BadRequest(
      `configs must be an array of at most ${NOTIFICATION_CONFIGS_MAX} configs (empty clears)`,
    );
  }
  for (const config of configs as unknown[]) {
    const type = (config as { type?: unknown } | null)?.type;
    if (typeof type === 'string' && UNSUPPORTED_TARGETS.includes(type))
      throw NotImplemented(`${type} targets are not supported; use a webhook`);
  }
  const parsed = configs.map((config: unknown, index) => parseConfig(config, `configs[${index}]`));
  if (new Set(parsed.map((config) => config.id)).size !== parsed.length)
    throw BadRequest('config ids must be unique');
  return parsed;
}

function parseConfig(value: unknown, where: string): NotificationConfigInput {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest(`${where} must be an object`);
  const fields = value as Record<string, unknown>;
  refuseUnknownFields(fields, configFields, where);
  const type = fields['type'] ?? 'webhook';
  if (type !== 'webhook')
    throw BadRequest(`${where}.type must be webhook (sns, sqs and lambda are not implemented)`);
  const id = fields['id'] ?? `cfg-${randomBytes(6).toString('hex')}`;
  if (
    typeof id !== 'string' ||
    !new RegExp(`^[A-Za-z0-9._-]{1,${NOTIFICATION_ID_CHARS_MAX}}$`).test(id)
  ) {
    throw BadRequest(`${where}.id must be 1 to ${NOTIFICATION_ID_CHARS_MAX} of A-Z a-z 0-9 . _ -`);
  }
  const url = parseWebhookUrl(fields['url']).href;
  const events = fields['events'];
  if (
    !Array.isArray(events) ||
    events.length === 0 ||
    !events.every((event) => (NOTIFICATION_EVENT_TYPES as readonly unknown[]).includes(event))
  ) {
    throw BadRequest(
      `${where}.events must list one or more of ${NOTIFICATION_EVENT_TYPES.join(', ')}`,
    );
  }
  // An event listed twice is refused, as a CORS rule's repeated entry is: misspelt input is
  // never quietly taken for something else (docs/errors.md).
  const listed = events as ObjectEventType[];
  const repeated = listed.find((event, index) => listed.indexOf(event) !== index);
  if (repeated !== undefined) throw BadRequest(`${where}.events lists ${repeated} twice`);
  const config: NotificationConfigInput = {
    id,
    type: 'webhook',
    url,
    events: listed,
  };
  for (const name of ['prefix', 'suffix'] as const) {
    const filter = fields[name];
    if (filter === undefined || filter === '') continue;
    if (typeof filter !== 'string' || filter.length > NOTIFICATION_FILTER_CHARS_MAX) {
      throw BadRequest(
        `${where}.${name} must be a string of at most ${NOTIFICATION_FILTER_CHARS_MAX} characters`,
      );
    }
    config[name] = filter;
  }
  return config;
}

export function configView(config: NotificationConfigRecord): NotificationConfigView {
  const view: NotificationConfigView = {
    id: config.id,
    type: config.type,
    url: config.url,
    events: config.events,
    hasSecret: config.sealedSecret.length > 0,
  };
  if (config.prefix !== undefined) view.prefix = config.prefix;
  if (config.suffix !== undefined) view.suffix = config.suffix;
  return view;
}

function activeBucket(context: EngineContext, tenantId: string, name: string): BucketRecord {
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant) throw NotFound(`tenant ${tenantId} not found`);
  if (tenant.state !== 'active') throw Forbidden(`tenant ${tenantId} is ${tenant.state}`);
  const bucket = context.store.get<BucketRecord>(DB.buckets, tenantChildKey(tenantId, name));
  if (!bucket) throw NotFound(`bucket ${name} not found`);
  return bucket;
}

/** The AAD of a config's sealed signing secret (a cluster member reseals it, shared-state.ts). */
export function secretAad(tenantId: string, bucketId: number, configId: string): string {
  return `webhook:${tenantId}:${bucketId}:${configId}`;
}

export function notificationsOf(
  store: IndexStore,
  bucketId: number,
): BucketNotificationsRecord | undefined {
  return store.get<BucketNotificationsRecord>(DB.notifications, bucketKeyPrefix(bucketId));
}

/**
 * Replaces a bucket's configs. Returns what the API shows, plus the plaintext secret of every
 * config id that is new (the only time a secret leaves the engine).
 */
export function putBucketNotifications(
  context: EngineContext,
  args: { tenantId: string; bucket: string; configs: unknown },
): { configs: NotificationConfigView[]; secrets: Record<string, string> } {
  const bucket = activeBucket(context, args.tenantId, args.bucket);
  const inputs = parseNotificationConfigs({ configs: args.configs });
  const dbKey = bucketKeyPrefix(bucket.id);
  const previous = context.store.get<BucketNotificationsRecord>(DB.notifications, dbKey);
  if (inputs.length === 0) {
    if (previous) context.store.remove(DB.notifications, dbKey);
    return { configs: [], secrets: {} };
  }
  const sealKey = deriveKey(context.masterKey, PURPOSE_SECRET_SEAL);
  const secrets: Record<string, string> = {};
  const now = context.now();
  const configs = inputs.map((input): NotificationConfigRecord => {
    const kept = previous?.configs.find((config) => config.id === input.id);
    if (kept) return { ...input, sealedSecret: kept.sealedSecret, createdAt: kept.createdAt };
    const secret = `${SIGNING_SECRET_PREFIX}${randomBytes(SIGNING_SECRET_BYTES).toString('base64url')}`;
    secrets[input.id] = secret;
    return {
      ...input,
      sealedSecret: sealSecret(
        sealKey,
        Buffer.from(secret),
        secretAad(bucket.tenantId, bucket.id, input.id),
      ),
      createdAt: now,
    };
  });
  const record: BucketNotificationsRecord = {
    tenantId: bucket.tenantId,
    bucketId: bucket.id,
    bucket: bucket.name,
    configs,
    updatedAt: now,
  };
  context.store.put(DB.notifications, dbKey, record);
  return { configs: configs.map(configView), secrets };
}

export function deleteBucketNotifications(
  context: EngineContext,
  args: { tenantId: string; bucket: string },
): void {
  const bucket = activeBucket(context, args.tenantId, args.bucket);
  context.store.remove(DB.notifications, bucketKeyPrefix(bucket.id));
}

/** Opens a config's signing secret (the delivery loop signs with it). */
export function openSigningSecret(
  masterKey: Buffer,
  record: BucketNotificationsRecord,
  config: NotificationConfigRecord,
): Buffer {
  return openSecret(
    deriveKey(masterKey, PURPOSE_SECRET_SEAL),
    Buffer.from(config.sealedSecret),
    secretAad(record.tenantId, record.bucketId, config.id),
  );
}

const wakers = new Set<() => void>();

/** The delivery loop registers here to hear of new outbox rows. */
export function onOutboxWrite(waker: () => void): () => void {
  wakers.add(waker);
  return () => wakers.delete(waker);
}

/** The fields of a version that an event reports. */
export interface EventSubject {
  key: string;
  versionId?: string;
  size?: number;
  etag?: string;
  deleteMarker?: boolean;
}

/**
 * Inside a command's transaction: writes one outbox row per config of the bucket that
 * subscribes to `type` and whose prefix and suffix match the key. Costs one read when the
 * bucket has no configs.
 */
export function recordObjectEvent(
  context: EngineContext,
  bucket: BucketRecord,
  type: ObjectEventType,
  subject: EventSubject,
): void {
  const record = notificationsOf(context.store, bucket.id);
  if (!record) return;
  const matching = record.configs.filter(
    (config) =>
      config.events.includes(type) &&
      subject.key.startsWith(config.prefix ?? '') &&
      subject.key.endsWith(config.suffix ?? ''),
  );
  if (matching.length === 0) return;
  const seq = nextCounter(context, 'nextSeq');
  const now = context.now();
  const event: ObjectEventRecord = {
    id: seq.toString(16).padStart(16, '0'),
    type,
    time: new Date(now).toISOString(),
    tenantId: bucket.tenantId,
    bucket: bucket.name,
    key: subject.key,
  };
  if (bucket.versioning !== 'Unversioned' && subject.versionId !== undefined)
    event.versionId = subject.versionId;
  if (type === 'object-created' && subject.size !== undefined) event.size = subject.size;
  if (type === 'object-created' && subject.etag) event.etag = subject.etag;
  for (const config of matching) {
    const row: OutboxRecord = {
      seq,
      tenantId: bucket.tenantId,
      bucketId: bucket.id,
      configId: config.id,
      event,
      createdAt: now,
      attempts: 0,
      nextAttemptAt: now,
    };
    context.store.put(DB.outbox, outboxKey(bucket.id, config.id, seq), row);
  }
  const status =
    statusOf(context.store, bucket.id) ?? emptyStatus(bucket.id, bucket.tenantId, bucket.name);
  status.pending += matching.length;
  context.store.put(DB.outboxStatus, bucketKeyPrefix(bucket.id), status);
  for (const wake of wakers) wake();
}

export function statusOf(store: IndexStore, bucketId: number): OutboxStatusRecord | undefined {
  return store.get<OutboxStatusRecord>(DB.outboxStatus, bucketKeyPrefix(bucketId));
}

function emptyStatus(bucketId: number, tenantId: string, bucket: string): OutboxStatusRecord {
  return { bucketId, tenantId, bucket, pending: 0, delivered: 0, failedAttempts: 0, discarded: 0 };
}

export type DeliveryOutcome =
  | { readonly kind: 'delivered' }
  | { readonly kind: 'failed'; readonly error: string; readonly retryAt: number }
  | { readonly kind: 'discarded'; readonly error?: string };

/**
 * Settles the head of a queue after an attempt. A row that changed meanwhile (there is no
 * such writer today) is left alone. Inside a transaction.
 */
export function settleDelivery(
  store: IndexStore,
  args: { key: Buffer; seq: number; outcome: DeliveryOutcome; now: number },
): void {
  const row = store.get<OutboxRecord>(DB.outbox, args.key);
  if (!row || row.seq !== args.seq) return;
  const status =
    statusOf(store, row.bucketId) ?? emptyStatus(row.bucketId, row.tenantId, row.event.bucket);
  const { outcome } = args;
  if (outcome.kind === 'failed') {
    row.attempts += 1;
    row.lastAttemptAt = args.now;
    row.lastError = outcome.error;
    row.nextAttemptAt = outcome.retryAt;
    store.put(DB.outbox, args.key, row);
    status.failedAttempts += 1;
    status.lastError = outcome.error;
    status.lastErrorAt = args.now;
  } else {
    store.remove(DB.outbox, args.key);
    status.pending = Math.max(0, status.pending - 1);
    if (outcome.kind === 'delivered') {
      status.delivered += 1;
      status.lastDeliveredAt = args.now;
    } else {
      status.discarded += 1;
      if (outcome.error !== undefined) {
        status.lastError = outcome.error;
        status.lastErrorAt = args.now;
      }
    }
  }
  store.put(DB.outboxStatus, bucketKeyPrefix(row.bucketId), status);
}

/**
 * A tenant purge (tenant-delete.ts): drops at most `limit` pending outbox rows of a bucket of
 * a deleted tenant, counting them as discarded so that `pending` stays equal to the rows left,
 * and once none are left removes the bucket's config and status records. `removed` counts rows
 * and records; the caller repeats until `done`. Inside a transaction.
 */
export function dropBucketNotifications(
  store: IndexStore,
  args: { bucketId: number; limit: number },
): { removed: number; done: boolean } {
  const prefix = bucketKeyPrefix(args.bucketId);
  const range = { start: prefix, end: Buffer.concat([prefix, Buffer.from([0xff])]) };
  const rows = [...store.range(DB.outbox, { ...range, limit: args.limit })];
  for (const { key } of rows) store.remove(DB.outbox, Buffer.from(key));
  const status = statusOf(store, args.bucketId);
  if (rows.length === args.limit) {
    if (status) {
      status.pending = Math.max(0, status.pending - rows.length);
      status.discarded += rows.length;
      store.put(DB.outboxStatus, prefix, status);
    }
    return { removed: rows.length, done: false };
  }
  let removed = rows.length;
  for (const db of [DB.notifications, DB.outboxStatus] as const) {
    if (!store.has(db, prefix)) continue;
    store.remove(db, prefix);
    removed += 1;
  }
  return { removed, done: true };
}

/**
 * Removes the config and status records of a bucket that no longer exists once its outbox
 * has drained. Returns whether it did. Inside a transaction.
 */
export function forgetDeletedBucket(
  store: IndexStore,
  args: { bucketId: number; tenantId: string; bucket: string },
): boolean {
  const bucket = store.get<BucketRecord>(DB.buckets, tenantChildKey(args.tenantId, args.bucket));
  if (bucket?.id === args.bucketId) return false;
  const prefix = bucketKeyPrefix(args.bucketId);
  for (const _row of store.range(DB.outbox, {
    start: prefix,
    end: Buffer.concat([prefix, Buffer.from([0xff])]),
    limit: 1,
  }))
    return false;
  store.remove(DB.notifications, prefix);
  store.remove(DB.outboxStatus, prefix);
  return true;
}
