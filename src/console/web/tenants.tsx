// Tenants: the list (a tenant-scoped token sees only its own) and, for an operator with a global
// token, the form that creates one.

import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ADMIN, allows, seg, type Tenant } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, StateBadge, formatTime, useAction, useLoad } from './ui.js';

function CreateTenant(props: { context: Context; onCreated: () => void }): JSX.Element {
  const [id, setId] = useState('');
  const [name, setName] = useState('');
  const action = useAction();
  const submit = (event: Event): void => {
    event.preventDefault();
    void action.run(async () => {
      const body: Record<string, string> = { id: id.trim() };
      if (name.trim() !== '') body['name'] = name.trim();
      await props.context.api.call('POST', `${ADMIN}/tenants`, body);
      setId('');
      setName('');
      props.onCreated();
    });
  };
  return (
    <Section title="Create a tenant">
      <form class="inline-form" onSubmit={submit}>
        <Field
          label="Tenant id"
          value={id}
          onInput={setId}
          required
          hint="3–63 of a-z, 0-9 and -; never reused"
        />
        <Field label="Display name (optional)" value={name} onInput={setName} />
        <button type="submit" class="primary" disabled={action.busy || id.trim() === ''}>
          Create tenant
        </button>
      </form>
      <ErrorBox error={action.error} />
    </Section>
  );
}

export function TenantsPage(props: { context: Context }): JSX.Element {
  const { context } = props;
  const [withDeleted, setWithDeleted] = useState(false);
  const { data, error, reload } = useLoad(
    () =>
      context.api.get<{ tenants: Tenant[] }>(
        `${ADMIN}/tenants${withDeleted ? '?includeDeleted=true' : ''}`,
      ),
    [context, withDeleted],
  );
  const canCreate = allows(context.session, 'operator') && context.session.tenant === null;
  return (
    <>
      <h1>Tenants</h1>
      {canCreate && <CreateTenant context={context} onCreated={reload} />}
      <Section
        title="All tenants"
        actions={
          <label class="check">
            <input
              type="checkbox"
              checked={withDeleted}
              onChange={(event) => setWithDeleted(event.currentTarget.checked)}
            />
            Show deleted
          </label>
        }
      >
        <ErrorBox error={error} />
        {data && data.tenants.length === 0 && <p class="muted">No tenants yet.</p>}
        {data && data.tenants.length > 0 && (
          <table>
            <thead>
              <tr>
                <th scope="col">Id</th>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {data.tenants.map((tenant) => (
                <tr key={tenant.id}>
                  <td>
                    <a href={`#/tenants/${seg(tenant.id)}`}>{tenant.id}</a>
                  </td>
                  <td>{tenant.name}</td>
                  <td>
                    <StateBadge state={tenant.state} />
                    {tenant.deletion && (
                      <span class="muted"> purge {tenant.deletion.state.replace('_', ' ')}</span>
                    )}
                  </td>
                  <td>{formatTime(tenant.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
    </>
  );
}
