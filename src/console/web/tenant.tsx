// One tenant: its state with disable and delete (each previewed as a dry-run plan before the
// confirm), its accounts and access keys, its quota and usage, its buckets and their lifecycle
// rules, public access and scrubs.

import { AccessTab } from './access.js';
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ADMIN, allows, seg, type Tenant } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, StateBadge, formatTime, useLoad } from './ui.js';
import { PlannedAction } from './planned.js';
import { KeysTab } from './keys.js';
import { QuotaTab } from './quota.js';
import { BucketsTab } from './buckets.js';
import { ScrubTab } from './scrub.js';
import { LifecycleTab } from './lifecycle.js';

const TABS: ReadonlyArray<readonly [string, string]> = [
  ['overview', 'Overview'],
  ['keys', 'Accounts and keys'],
  ['quota', 'Quota and usage'],
  ['buckets', 'Buckets'],
  ['lifecycle', 'Lifecycle'],
  ['access', 'Public access'],
  ['scrub', 'Scrub'],
];

function Lifecycle(props: { context: Context; tenant: Tenant; onChange: () => void }) {
  const { context, tenant } = props;
  const [reason, setReason] = useState('');
  const [confirm, setConfirm] = useState('');
  const base = `${ADMIN}/tenants/${seg(tenant.id)}`;
  const query = (dryRun: boolean): string => (dryRun ? '?dryRun=true' : '');
  if (!allows(context.session, 'owner') || tenant.state === 'deleted') return null;
  if (tenant.state === 'active')
    return (
      <Section title="Disable this tenant">
        <p>
          Disabling revokes every active access key of the tenant at once and freezes its data.
          There is no re-enable. A disabled tenant can then be deleted.
        </p>
        <PlannedAction
          label="Disable tenant"
          danger
          ready={reason.trim() !== ''}
          run={(dryRun) =>
            context.api.call('POST', `${base}/disable${query(dryRun)}`, { reason: reason.trim() })
          }
          onDone={props.onChange}
        >
          <Field label="Reason (for the audit log)" value={reason} onInput={setReason} required />
        </PlannedAction>
      </Section>
    );
  return (
    <Section title="Delete this tenant">
      <p>
        Deleting removes every bucket, object, version, account and key of the tenant. Versions
        under retention or legal hold stop it.
      </p>
      <PlannedAction
        label="Delete tenant"
        danger
        ready={reason.trim() !== '' && confirm === tenant.id}
        run={(dryRun) =>
          context.api.call('POST', `${base}/delete${query(dryRun)}`, {
            reason: reason.trim(),
            confirm,
          })
        }
        onDone={props.onChange}
      >
        <Field label="Reason (for the audit log)" value={reason} onInput={setReason} required />
        <Field
          label={`Type the tenant id (${tenant.id}) to confirm`}
          value={confirm}
          onInput={setConfirm}
          required
        />
      </PlannedAction>
    </Section>
  );
}

export function TenantPage(props: { context: Context; tenantId: string; tab: string }) {
  const { context, tenantId, tab } = props;
  const {
    data: tenant,
    error,
    reload,
  } = useLoad(
    () => context.api.get<Tenant>(`${ADMIN}/tenants/${seg(tenantId)}`),
    [context, tenantId],
  );
  const live = tenant !== undefined && tenant.state !== 'deleted';
  let body: JSX.Element | null = null;
  if (tenant && live && tab === 'keys') body = <KeysTab context={context} tenant={tenant} />;
  else if (tenant && live && tab === 'quota') body = <QuotaTab context={context} tenant={tenant} />;
  else if (tenant && live && tab === 'buckets')
    body = <BucketsTab context={context} tenant={tenant} />;
  else if (tenant && live && tab === 'lifecycle')
    body = <LifecycleTab context={context} tenant={tenant} />;
  else if (tenant && live && tab === 'access')
    body = <AccessTab context={context} tenant={tenant} />;
  else if (tenant && live && tab === 'scrub') body = <ScrubTab context={context} tenant={tenant} />;
  else if (tenant)
    body = (
      <>
        <Section title="Tenant">
          <dl class="facts">
            <dt>Id</dt>
            <dd>
              <code>{tenant.id}</code>
            </dd>
            <dt>Name</dt>
            <dd>{tenant.name}</dd>
            <dt>State</dt>
            <dd>
              <StateBadge state={tenant.state} />
              {tenant.deletion && ` purge ${tenant.deletion.state.replace('_', ' ')}`}
            </dd>
            <dt>Created</dt>
            <dd>{formatTime(tenant.createdAt)}</dd>
            {tenant.disabledAt !== undefined && (
              <>
                <dt>Disabled</dt>
                <dd>{formatTime(tenant.disabledAt)}</dd>
              </>
            )}
            {tenant.deletedAt !== undefined && (
              <>
                <dt>Deleted</dt>
                <dd>{formatTime(tenant.deletedAt)}</dd>
              </>
            )}
          </dl>
        </Section>
        <Lifecycle context={context} tenant={tenant} onChange={reload} />
      </>
    );
  return (
    <>
      <p class="crumbs">
        <a href="#/tenants">Tenants</a> / {tenantId}
      </p>
      <h1>
        {tenant?.name ?? tenantId} {tenant && <StateBadge state={tenant.state} />}
      </h1>
      {live && (
        <nav class="tabs" aria-label="Tenant sections">
          {TABS.map(([id, label]) => (
            <a
              key={id}
              href={`#/tenants/${seg(tenantId)}/${id}`}
              aria-current={tab === id ? 'page' : undefined}
            >
              {label}
            </a>
          ))}
        </nav>
      )}
      <ErrorBox error={error} />
      {body}
    </>
  );
}
