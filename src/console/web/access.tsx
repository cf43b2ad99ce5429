// A tenant's public access block: the four switches that keep every bucket of the tenant from
// being opened to anyone by ACLs or policies (previewed as a dry run, then saved), and each
// bucket's own block and the block in force. A viewer sees the switches disabled.

import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { CONSOLE, allows, seg, type AccessBlock, type PublicAccess, type Tenant } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, useLoad } from './ui.js';
import { PlannedAction } from './planned.js';

const SWITCHES: ReadonlyArray<readonly [keyof AccessBlock, string, string]> = [
  ['blockPublicAcls', 'Block public ACLs', 'a request that sets a public ACL is refused'],
  ['ignorePublicAcls', 'Ignore public ACLs', 'grants to everyone are ignored when authorizing'],
  ['blockPublicPolicy', 'Block public policies', 'a bucket policy that allows anyone is refused'],
  [
    'restrictPublicBuckets',
    'Restrict public buckets',
    "a public policy grants nothing beyond the bucket's tenant",
  ],
];

const OFF: AccessBlock = {
  blockPublicAcls: false,
  ignorePublicAcls: false,
  blockPublicPolicy: false,
  restrictPublicBuckets: false,
};

function onOff(block: AccessBlock | null): string {
  if (block === null) return 'none';
  const on = SWITCHES.filter(([name]) => block[name]).map(([, label]) => label);
  return on.length === 0 ? 'all off' : on.join(', ');
}

export function AccessTab(props: { context: Context; tenant: Tenant }): JSX.Element {
  const { context, tenant } = props;
  const path = `${CONSOLE}/tenants/${seg(tenant.id)}/public-access-block`;
  const state = useLoad(() => context.api.get<PublicAccess>(path), [context, path]);
  const [block, setBlock] = useState<AccessBlock>(OFF);
  const [reason, setReason] = useState('');
  const [done, setDone] = useState<string | undefined>(undefined);
  useEffect(() => {
    if (state.data) setBlock(state.data.block ?? OFF);
  }, [state.data]);
  const operator = allows(context.session, 'operator');
  const data = state.data;
  const switches = (
    <fieldset class="switches" disabled={!operator}>
      <legend>Switches</legend>
      {SWITCHES.map(([name, label, hint]) => (
        <label key={name} class="switch">
          <input
            type="checkbox"
            checked={block[name]}
            onChange={(event) => setBlock({ ...block, [name]: event.currentTarget.checked })}
          />{' '}
          {label} <small class="hint">({hint})</small>
        </label>
      ))}
    </fieldset>
  );
  return (
    <>
      {done !== undefined && (
        <p class="ok" role="status">
          {done}
        </p>
      )}
      <ErrorBox error={state.error} />
      <Section title="Public access block of the tenant">
        <p>
          These switches apply to every bucket of the tenant, on top of each bucket's own block (set
          through the S3 API): a switch is in force on a bucket when either turns it on.
        </p>
        {operator ? (
          <PlannedAction
            label="Save public access block"
            run={(dryRun) =>
              context.api.call('PUT', `${path}${dryRun ? '?dryRun=true' : ''}`, {
                block,
                ...(reason.trim() === '' ? {} : { reason: reason.trim() }),
              })
            }
            onDone={() => {
              setDone(`Public access block of ${tenant.id} saved.`);
              state.reload();
            }}
          >
            {switches}
            <Field label="Reason (optional)" value={reason} onInput={setReason} />
          </PlannedAction>
        ) : (
          switches
        )}
      </Section>
      <Section title="Buckets">
        {data && data.buckets.length === 0 && <p>No bucket yet.</p>}
        {data && data.buckets.length > 0 && (
          <table aria-label="Public access of buckets">
            <thead>
              <tr>
                <th scope="col">Bucket</th>
                <th scope="col">Its own block</th>
                <th scope="col">In force</th>
              </tr>
            </thead>
            <tbody>
              {data.buckets.map((bucket) => (
                <tr key={bucket.name}>
                  <td>{bucket.name}</td>
                  <td>{onOff(bucket.block)}</td>
                  <td>{onOff(bucket.effective)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
    </>
  );
}
