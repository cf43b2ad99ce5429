// Cluster membership and placement, as they are: the consensus members the admin API reports
// (on a single node, this node alone as voter and leader). Changing membership and placement
// belongs to cluster mode; this page only shows what exists.

import type { JSX } from 'preact';
import { ADMIN, type Member } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Section, StateBadge, useLoad } from './ui.js';

export function ClusterPage(props: { context: Context }): JSX.Element {
  const { data, error } = useLoad(
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
        <p>
          {data && data.members.length > 1
            ? `${String(data.members.length)} members.`
            : 'A single node: every object has one copy, on this node.'}{' '}
          Replication factors, zones and rebalancing are managed by cluster mode.
        </p>
      </Section>
    </>
  );
}
