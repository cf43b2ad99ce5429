// Cluster membership and placement: the consensus members the admin API reports (on a single
// node, this node alone as voter and leader), where a tenant's buckets live (each bucket's
// replica nodes, the buckets each node holds) and, in cluster mode, an owner's drain of a member
// (previewed: the admin API's plan says what moves), which is how placement is changed.

import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import {
  ADMIN,
  CONSOLE,
  allows,
  seg,
  type Member,
  type Placement,
  type Plan,
  type Tenant,
} from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, Select, StateBadge, formatBytes, useLoad } from './ui.js';
import { PlannedAction } from './planned.js';

function PlacementView(props: { context: Context }): JSX.Element {
  const { context } = props;
  const scope = context.session.tenant;
  const tenants = useLoad(
    () =>
      scope === null
        ? context.api
            .get<{ tenants: Tenant[] }>(`${ADMIN}/tenants`)
            .then((answer) =>
              answer.tenants.filter((tenant) => tenant.state !== 'deleted').map((t) => t.id),
            )
        : Promise.resolve([scope]),
    [context, scope],
  );
  const [chosen, setChosen] = useState<string | undefined>(undefined);
  const tenantId = chosen ?? tenants.data?.[0];
  const placement = useLoad(
    () =>
      tenantId === undefined
        ? Promise.resolve(undefined)
        : context.api.get<Placement>(`${CONSOLE}/placement?tenant=${seg(tenantId)}`),
    [context, tenantId],
  );
  const data = placement.data;
  const single = data?.mode === 'single';
  const nameOf = (id: string): string =>
    single ? 'this node' : (data?.nodes.find((node) => node.id === id)?.name ?? id);
  return (
    <>
      <ErrorBox error={tenants.error ?? placement.error} />
      {tenants.data && tenants.data.length > 1 && tenantId !== undefined && (
        <Select
          label="Tenant"
          value={tenantId}
          options={tenants.data.map((id) => [id, id] as const)}
          onChange={setChosen}
        />
      )}
      {data && (
        <>
          <p>
            {single
              ? 'A single node: every bucket has one copy, on this node.'
              : `Each bucket has ${String(data.replicationFactor)} copies, on different zones ` +
                'where there are; the first replica leads.'}
          </p>
          <table aria-label="Buckets per node">
            <thead>
              <tr>
                <th scope="col">Node</th>
                <th scope="col">Zone</th>
                <th scope="col">State</th>
                <th scope="col">Buckets of {data.tenantId} held</th>
                <th scope="col">Of which it leads</th>
              </tr>
            </thead>
            <tbody>
              {data.nodes.map((node) => (
                <tr key={node.id}>
                  <td>{single ? 'this node' : node.name}</td>
                  <td>{node.zone === '' ? '—' : node.zone}</td>
                  <td>
                    <StateBadge state={node.state} />
                    {!node.storage && ' (holds no data)'}
                  </td>
                  <td>{String(node.buckets)}</td>
                  <td>{String(node.preferred)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {data.buckets.length > 0 && (
            <table aria-label="Bucket replicas">
              <thead>
                <tr>
                  <th scope="col">Bucket</th>
                  <th scope="col">Replicas (the first leads)</th>
                </tr>
              </thead>
              <tbody>
                {data.buckets.map((bucket) => (
                  <tr key={bucket.name}>
                    <td>{bucket.name}</td>
                    <td>{bucket.replicas.map(nameOf).join(', ')}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          {data.truncated && <p class="hint">The first 1000 buckets only.</p>}
        </>
      )}
    </>
  );
}

/** A membership change's plan (admin-api.md): quorum and storage before and after. */
type MembershipPlan = Plan & {
  quorum?: { votersBefore: number; votersAfter: number; quorumAfter: number };
  storage?: { nodesBefore: number; nodesAfter: number; effectiveFactorAfter: number };
  partitionsToMove?: number;
  bytesToMove?: number;
};

function MembershipPlanView(props: { plan: MembershipPlan }): JSX.Element {
  const { quorum, storage, partitionsToMove, bytesToMove } = props.plan;
  const rows: Array<[string, string]> = [];
  if (quorum) {
    rows.push(['Voters', `${String(quorum.votersBefore)} → ${String(quorum.votersAfter)}`]);
    rows.push(['Quorum after', String(quorum.quorumAfter)]);
  }
  if (storage) {
    rows.push(['Storage nodes', `${String(storage.nodesBefore)} → ${String(storage.nodesAfter)}`]);
    rows.push(['Copies of each object after', String(storage.effectiveFactorAfter)]);
  }
  if (partitionsToMove !== undefined) rows.push(['Partitions to move', String(partitionsToMove)]);
  if (bytesToMove !== undefined) rows.push(['Bytes to move (at most)', formatBytes(bytesToMove)]);
  return (
    <table class="plan-table" aria-label="Membership plan">
      <tbody>
        {rows.map(([name, value]) => (
          <tr key={name}>
            <th scope="row">{name}</th>
            <td>{value}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** An owner's drain of a member in cluster mode: its replicas move to the other nodes. */
function DrainMember(props: { context: Context; members: Member[]; onDone: () => void }) {
  const { context, members } = props;
  const [id, setId] = useState(members[0]?.id ?? '');
  const [reason, setReason] = useState('');
  const [confirm, setConfirm] = useState('');
  return (
    <PlannedAction
      label="Drain member"
      danger
      ready={reason.trim() !== '' && confirm === id}
      run={(dryRun) =>
        context.api.call(
          'POST',
          `${ADMIN}/cluster/consensus/drain${dryRun ? '?dryRun=true' : ''}`,
          { id, reason: reason.trim(), confirm },
        )
      }
      detail={(plan) => <MembershipPlanView plan={plan} />}
      onDone={props.onDone}
    >
      <Select
        label="Member"
        value={id}
        options={members.map((member) => [member.id, `${member.name} (${member.id})`] as const)}
        onChange={setId}
      />
      <Field label="Reason (for the audit log)" value={reason} onInput={setReason} required />
      <Field label={`Type the member id (${id}) to confirm`} value={confirm} onInput={setConfirm} />
    </PlannedAction>
  );
}

export function ClusterPage(props: { context: Context }): JSX.Element {
  const { data, error, reload } = useLoad(
    () =>
      props.context.api.get<{ members: Member[]; leaderId: string }>(
        `${ADMIN}/cluster/consensus/membership`,
      ),
    [props.context],
  );
  return (
    <>
      <h1>Cluster</h1>
      <Section title="Consensus membership">
        <ErrorBox error={error} />
        {data && (
          <table>
            <thead>
              <tr>
                <th scope="col">Node</th>
                <th scope="col">Name</th>
                <th scope="col">Address</th>
                <th scope="col">State</th>
                <th scope="col">Zone</th>
                <th scope="col">Leader</th>
              </tr>
            </thead>
            <tbody>
              {data.members.map((member) => (
                <tr key={member.id}>
                  <td>
                    <code>{member.id}</code>
                  </td>
                  <td>{member.name}</td>
                  <td>{member.address}</td>
                  <td>
                    <StateBadge state={member.state} />
                  </td>
                  <td>{member.zone ?? '—'}</td>
                  <td>{member.id === data.leaderId ? 'yes' : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <Section title="Placement">
        <PlacementView context={props.context} />
      </Section>
      {data &&
        data.members.length > 1 &&
        props.context.session.tenant === null &&
        allows(props.context.session, 'owner') && (
          <Section title="Drain a member">
            <p>
              A drained member takes no new replicas; its buckets move to the other nodes, and it
              can then be removed. The preview is the admin API's plan.
            </p>
            <DrainMember context={props.context} members={data.members} onDone={reload} />
          </Section>
        )}
    </>
  );
}
