// The audit log: filter by tenant and time on the server (the admin API's `tenant` and
// `since`), by action and outcome in the page over the newest 1000 matching rows, and page
// through them 25 at a time.

import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { ADMIN, type AuditEvent, type Tenant } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, Select, formatTime, useLoad } from './ui.js';

const PAGE_SIZE = 25;
const FETCH_LIMIT = 1000;

export function AuditTable(props: { events: readonly AuditEvent[] }): JSX.Element {
  if (props.events.length === 0) return <p class="muted">No events.</p>;
  return (
    <table class="audit">
      <thead>
        <tr>
          <th scope="col">Time (UTC)</th>
          <th scope="col">Action</th>
          <th scope="col">Outcome</th>
          <th scope="col">Tenant</th>
          <th scope="col">Actor</th>
          <th scope="col">Resource</th>
          <th scope="col">Reason</th>
        </tr>
      </thead>
      <tbody>
        {props.events.map((event) => (
          <tr key={event.id}>
            <td class="nowrap">{formatTime(event.time)}</td>
            <td>
              {event.action}
              {event.dryRun && <span class="badge">dry run</span>}
            </td>
            <td>
              <span class={`badge badge-${event.outcome}`}>
                {event.outcome} {String(event.status)}
              </span>
            </td>
            <td>{event.tenantId ?? '—'}</td>
            <td>
              <code>{event.actor}</code>
            </td>
            <td class="resource">
              <code>{event.resource}</code>
            </td>
            <td>{event.reason ?? ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function AuditPage(props: { context: Context }): JSX.Element {
  const { context } = props;
  const scoped = context.session.tenant;
  const [tenant, setTenant] = useState(scoped ?? '');
  const [since, setSince] = useState('24h');
  const [action, setAction] = useState('');
  const [outcome, setOutcome] = useState('');
  const [page, setPage] = useState(0);
  const tenants = useLoad(
    () => context.api.get<{ tenants: Tenant[] }>(`${ADMIN}/tenants`),
    [context],
  );
  const query = new URLSearchParams({ limit: String(FETCH_LIMIT) });
  if (since !== '') query.set('since', since);
  if (tenant !== '') query.set('tenant', tenant);
  const events = useLoad(
    () => context.api.get<{ events: AuditEvent[] }>(`${ADMIN}/audit?${query.toString()}`),
    [context, query.toString()],
  );
  const needle = action.trim().toLowerCase();
  const shown = (events.data?.events ?? []).filter(
    (event) =>
      (needle === '' || event.action.toLowerCase().includes(needle)) &&
      (outcome === '' || event.outcome === outcome),
  );
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
  const current = Math.min(page, pages - 1);
  const reset =
    <T,>(set: (value: T) => void) =>
    (value: T) => {
      set(value);
      setPage(0);
    };
  const tenantOptions: Array<readonly [string, string]> = [
    ...(scoped === null ? [['', 'All tenants'] as const] : []),
    ...(tenants.data?.tenants ?? []).map((item) => [item.id, item.id] as const),
  ];
  return (
    <>
      <h1>Audit log</h1>
      <Section title="Filters">
        <div class="inline-form" role="search">
          <Select
            label="Tenant"
            value={tenant}
            options={tenantOptions}
            onChange={reset(setTenant)}
          />
          <Select
            label="Time"
            value={since}
            options={[
              ['15m', 'Last 15 minutes'],
              ['1h', 'Last hour'],
              ['24h', 'Last 24 hours'],
              ['7d', 'Last 7 days'],
              ['30d', 'Last 30 days'],
              ['', 'All time'],
            ]}
            onChange={reset(setSince)}
          />
          <Field
            label="Action contains"
            value={action}
            onInput={reset(setAction)}
            placeholder="createTenantKey"
          />
          <Select
            label="Outcome"
            value={outcome}
            options={[
              ['', 'Any'],
              ['allowed', 'Allowed'],
              ['denied', 'Denied'],
              ['error', 'Error'],
            ]}
            onChange={reset(setOutcome)}
          />
          <button type="button" onClick={events.reload}>
            Refresh
          </button>
        </div>
      </Section>
      <Section title={`Events (${String(shown.length)}${shown.length >= FETCH_LIMIT ? '+' : ''})`}>
        <ErrorBox error={events.error} />
        <AuditTable events={shown.slice(current * PAGE_SIZE, (current + 1) * PAGE_SIZE)} />
        <nav class="pager" aria-label="Pages of events">
          <button type="button" disabled={current === 0} onClick={() => setPage(current - 1)}>
            Newer
          </button>
          <span>
            Page {String(current + 1)} of {String(pages)}
          </span>
          <button
            type="button"
            disabled={current >= pages - 1}
            onClick={() => setPage(current + 1)}
          >
            Older
          </button>
        </nav>
        <p class="muted">
          The newest {String(FETCH_LIMIT)} events matching tenant and time are read; action and
          outcome filter those.
        </p>
      </Section>
    </>
  );
}
