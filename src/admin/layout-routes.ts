// The cluster's layout on the admin API (docs/cluster.md §5): `GET /cluster/layout` answers the
// stored layout's version, its partition count (256, whatever the node count), the replication
// factor, and for every partition its replicas in order (the first the preferred leader), its
// leader and the leader's fencing epoch; with `?tenant=` also which partition each of that
// tenant's buckets is in. Any valid token reads it (a tenant-scoped one only with its tenant).
// A single node answers one partition table of itself, version 0.
//
// `bytesOfPartitions` estimates what a move of some partitions copies, for the membership plans
// (`bytesToMove`) and the rebalance dry run: the logical bytes of the buckets in them as this
// node's index counts them (a bucket this node holds no replica of counts what it has of it).

import type { Route } from '../http/router.js';
import type { Handler } from '../http/server.js';
import {
  DB,
  tenantChildKey,
  tenantChildRange,
  type BucketRecord,
  type UsageRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import { partitionOf, PARTITIONS } from '../cluster/layout.js';
import type { ClusterAccess } from '../cluster/access.js';
import { validateTenantId } from '../security/names.js';
import { BadRequest } from '../util/errors.js';
import type { AdminServices } from './request.js';
import { problems, str } from './json.js';

/** Buckets listed in one answer at most (`truncated` says when a tenant has more). */
export const LAYOUT_BUCKETS_MAX = 1000;
const int = { type: 'integer', minimum: 0 } as const;

const layoutSchema = {
  type: 'object',
  required: ['mode', 'version', 'partitionCount', 'replicationFactor', 'partitions'],
  properties: {
    mode: { type: 'string', enum: ['single', 'cluster'] },
    version: { ...int, description: 'the stored layout version (0: none stored yet)' },
    partitionCount: { ...int, description: 'fixed for the life of the cluster' },
    replicationFactor: int,
    partitions: {
      type: 'array',
      items: {
        type: 'object',
        required: ['partition', 'replicas'],
        properties: {
          partition: int,
          replicas: { type: 'array', items: str, description: 'in order; the first preferred' },
          leader: { ...str, description: 'the member that took its leadership last' },
          epoch: { ...int, description: 'grows at every change of leader; fences the deposed' },
        },
      },
    },
    buckets: {
      type: 'array',
      maxItems: LAYOUT_BUCKETS_MAX,
      description: "with ?tenant=: the tenant's buckets and their partitions",
      items: { type: 'object', properties: { name: str, partition: int } },
    },
    truncated: { type: 'boolean' },
  },
} as const;

export function layoutRoute(
  services: AdminServices,
  cluster: ClusterAccess | undefined,
): Route<Handler> {
  return {
    method: 'GET',
    path: '/cluster/layout',
    operationId: 'getClusterLayout',
    doc: {
      summary:
        "The stored layout: every partition's replicas, leader and epoch (and with ?tenant=, its buckets' partitions)",
      auth: 'bearer',
      query: { tenant: { type: 'string', description: 'also list this tenant’s buckets' } },
      responses: {
        200: { description: 'the layout', schema: layoutSchema },
        ...problems(400, 409),
      },
    },
    handler: async (exchange) => {
      const caller = services.auth.authenticate(exchange, 'viewer');
      const tenantId = exchange.query.get('tenant') ?? undefined;
      if (tenantId !== undefined) {
        validateTenantId(tenantId);
        caller.requireTenant(tenantId);
      } else caller.requireGlobal();
      const buckets = tenantId === undefined ? {} : bucketsOf(services.store, tenantId);
      if (cluster === undefined) {
        exchange.sendJson(200, {
          mode: 'single',
          version: 0,
          partitionCount: PARTITIONS,
          replicationFactor: 1,
          partitions: [...Array(PARTITIONS).keys()].map((partition) => ({
            partition,
            replicas: [services.node.id],
            leader: services.node.id,
            epoch: 0,
          })),
          ...buckets,
        });
        return;
      }
      const placement = await (await cluster.membership()).placement();
      exchange.sendJson(200, {
        mode: 'cluster',
        version: placement.version,
        partitionCount: placement.partitionCount,
        replicationFactor: placement.replicationFactor,
        partitions: placement.table.map((replicas, partition) => {
          const leader = placement.leaders.get(partition);
          return {
            partition,
            replicas,
            ...(leader === undefined ? {} : { leader: leader.nodeId, epoch: leader.epoch }),
          };
        }),
        ...buckets,
      });
    },
  };
}

function bucketsOf(
  store: IndexStore,
  tenantId: string,
): { buckets: Array<{ name: string; partition: number }>; truncated: boolean } {
  if (tenantId === '') throw BadRequest('tenant is empty');
  const found = [
    ...store.range<BucketRecord>(DB.buckets, {
      ...tenantChildRange(tenantId),
      limit: LAYOUT_BUCKETS_MAX + 1,
    }),
  ].map(({ value }) => ({ name: value.name, partition: partitionOf(value.id) }));
  return {
    buckets: found.slice(0, LAYOUT_BUCKETS_MAX),
    truncated: found.length > LAYOUT_BUCKETS_MAX,
  };
}

/** The logical bytes of the buckets in `partitions`, as this node's index counts them. */
export function bytesOfPartitions(store: IndexStore, partitions: Iterable<number>): number {
  const wanted = new Set(partitions);
  let bytes = 0;
  for (const { value: usage } of store.range<UsageRecord>(DB.usage, {})) {
    for (const [name, counts] of Object.entries(usage.buckets ?? {})) {
      const bucket = store.get<BucketRecord>(DB.buckets, tenantChildKey(usage.tenantId, name));
      if (bucket !== undefined && wanted.has(partitionOf(bucket.id))) bytes += counts.logicalBytes;
    }
  }
  return bytes;
}
