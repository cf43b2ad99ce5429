// Console API route of placement: which nodes hold each bucket of a tenant, and how many buckets
// each node holds. In cluster mode (docs/cluster.md §5) a bucket's replicas are its partition's
// in the stored layout's partition table (src/cluster/layout.ts), read from etcd here as the
// engines read it, so the page shows what the engines do; before a layout is stored, the table
// the membership gives. On a single node every bucket has one copy, on this node.
//
// Roles (docs/console.md): any token reads; a tenant-scoped one only its tenant's buckets.
// Changing placement is the membership's work (join, drain, remove on the admin API), which the
// console's Cluster page offers in cluster mode; a per-bucket factor does not exist yet.

import { hostname } from 'node:os';
import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import {
  DB,
  tenantChildRange,
  tenantKey,
  type BucketRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import { ClusterAccess } from '../cluster/access.js';
import { assignPartitions, partitionOf } from '../cluster/layout.js';
import { validateTenantId } from '../security/names.js';
import { BadRequest, NotFound } from '../util/errors.js';
import type { ConsoleServices } from './api.js';
import { problems } from './schemas.js';
import { requireTenantScope } from './request.js';

const bearer = 'bearer' as const;
/** Buckets one answer places at most (`truncated` says when a tenant has more). */
export const PLACEMENT_BUCKETS_MAX = 1000;
/** Member states that hold data (cluster-view.ts): a learner or a drained node holds none. */
const STORAGE_STATES: ReadonlySet<string> = new Set(['voter', 'draining']);

export interface PlacedMember {
  readonly id: string;
  readonly name: string;
  readonly zone: string;
  readonly state: string;
}

export interface Placement {
  mode: 'single' | 'cluster';
  replicationFactor: number;
  nodes: Array<PlacedMember & { storage: boolean; buckets: number; preferred: number }>;
  buckets: Array<{ name: string; partition: number; replicas: string[] }>;
  truncated: boolean;
}

/**
 * Where each of `buckets` lives among `members` (pure: the cluster's rule, no I/O): by the
 * stored partition `table` when there is one, else by the table the storage members give.
 */
export function placementOf(
  members: readonly PlacedMember[],
  replicationFactor: number,
  buckets: ReadonlyArray<Pick<BucketRecord, 'id' | 'name'>>,
  stored?: ReadonlyArray<readonly string[]>,
): Omit<Placement, 'mode' | 'truncated'> {
  const storage = members.filter((member) => STORAGE_STATES.has(member.state));
  // As the layout assigns (layout.ts): a draining member takes no replica, its data moving off,
  // unless every storage member drains.
  const staying = storage.filter((member) => member.state !== 'draining');
  const candidates = staying.length > 0 ? staying : storage;
  const table =
    stored !== undefined && stored.length > 0
      ? stored
      : assignPartitions(
          undefined,
          candidates.map((member) => ({ id: member.id, zone: member.zone, draining: false })),
          replicationFactor,
        );
  const held = new Map<string, { buckets: number; preferred: number }>();
  const placed = buckets.map((bucket) => {
    const partition = partitionOf(bucket.id);
    const replicas = [...(table[partition] ?? [])];
    replicas.forEach((id, rank) => {
      const count = held.get(id) ?? { buckets: 0, preferred: 0 };
      count.buckets += 1;
      if (rank === 0) count.preferred += 1;
      held.set(id, count);
    });
    return { name: bucket.name, partition, replicas };
  });
  return {
    replicationFactor: Math.min(replicationFactor, table[0]?.length ?? candidates.length),
    nodes: members.map((member) => ({
      ...member,
      storage: STORAGE_STATES.has(member.state),
      ...(held.get(member.id) ?? { buckets: 0, preferred: 0 }),
    })),
    buckets: placed,
  };
}

export function placementRoutes(services: ConsoleServices): Route<Handler>[] {
  const settings = services.settings;
  const cluster =
    settings === undefined || settings.string('cluster.listen') === ''
      ? undefined
      : new ClusterAccess(settings.string('data_dir'), settings.int('cluster.replication_factor'));
  const members = async (): Promise<{
    members: PlacedMember[];
    factor: number;
    table?: ReadonlyArray<readonly string[]>;
  }> => {
    if (cluster === undefined || settings === undefined)
      return { members: [{ id: 'local', name: hostname(), zone: '', state: 'voter' }], factor: 1 };
    const membership = await cluster.membership();
    const [view, placement] = await Promise.all([membership.view(), membership.placement()]);
    return {
      members: view.members.map(({ id, name, zone, state }) => ({ id, name, zone, state })),
      factor: placement.replicationFactor,
      table: placement.table,
    };
  };
  return [
    {
      method: 'GET',
      path: '/placement',
      operationId: 'getConsolePlacement',
      doc: {
        summary:
          "Where a tenant's buckets live: each bucket's replica nodes (the first preferred) and the buckets each node holds",
        auth: bearer,
        query: { tenant: { type: 'string', description: 'the tenant whose buckets to place' } },
        responses: {
          200: { description: 'the placement', schema: placementSchema },
          ...problems(400, 404, 409),
        },
      },
      handler: async (exchange) => {
        const { token } = services.authenticate(exchange, 'viewer');
        const tenantId = exchange.query.get('tenant') ?? token.tenant;
        if (tenantId === undefined) throw BadRequest('tenant is required');
        validateTenantId(tenantId);
        requireTenantScope(exchange, token, tenantId);
        const tenant = services.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
        if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
        const buckets = [
          ...services.store.range<BucketRecord>(DB.buckets, {
            ...tenantChildRange(tenantId),
            limit: PLACEMENT_BUCKETS_MAX + 1,
          }),
        ].map((entry) => entry.value);
        const { members: found, factor, table } = await members();
        const placed = placementOf(found, factor, buckets.slice(0, PLACEMENT_BUCKETS_MAX), table);
        exchange.sendJson(200, {
          mode: cluster === undefined ? 'single' : 'cluster',
          tenantId,
          ...placed,
          truncated: buckets.length > PLACEMENT_BUCKETS_MAX,
        });
      },
    },
  ];
}

const str = { type: 'string' } as const;
const int = { type: 'integer', minimum: 0 } as const;
const placementSchema = {
  type: 'object',
  required: ['mode', 'tenantId', 'replicationFactor', 'nodes', 'buckets', 'truncated'],
  properties: {
    mode: { type: 'string', enum: ['single', 'cluster'] },
    tenantId: str,
    replicationFactor: { ...int, description: 'copies of each bucket (at most the storage nodes)' },
    nodes: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          id: str,
          name: str,
          zone: str,
          state: str,
          storage: { type: 'boolean', description: 'the node holds data in its state' },
          buckets: { ...int, description: "the tenant's buckets it holds a replica of" },
          preferred: { ...int, description: 'of which it is the first replica' },
        },
      },
    },
    buckets: {
      type: 'array',
      maxItems: PLACEMENT_BUCKETS_MAX,
      items: {
        type: 'object',
        properties: {
          name: str,
          partition: { ...int, description: "the bucket's partition (0-255) in the layout" },
          replicas: { type: 'array', items: str },
        },
      },
    },
    truncated: { type: 'boolean' },
  },
} as const;
