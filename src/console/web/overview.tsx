// Overview: health, the tenants and their usage, live request and byte rates from the service's
// Prometheus metrics (live-metrics.tsx), the request rate of the last hour (counted from the
// audit log, one row per request on both planes) and the latest audit events.

import type { JSX } from 'preact';
import { ADMIN, seg, type AuditEvent, type Tenant, type Usage } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Section, Stat, StateBadge, formatBytes, useLoad } from './ui.js';
import { TimeChart } from './chart.js';
import { AuditTable } from './audit.js';
import { LiveMetrics } from './live-metrics.js';

/** Tenants whose usage the overview fetches at most (the tenants page lists them all). */
const USAGE_TENANTS_MAX = 50;

interface Overview {
  health: string;
  tenants: Tenant[];
  usage: Map<string, Usage>;
  events: AuditEvent[];
}

async function loadOverview(context: Context): Promise<Overview> {
  const { api } = context;
  const [health, list, audit] = await Promise.all([
    api.get<{ status: string }>(`${ADMIN}/healthz`).then(
      (answer) => answer.status,
      () => 'unreachable',
    ),
    api.get<{ tenants: Tenant[] }>(`${ADMIN}/tenants`),
    api.get<{ events: AuditEvent[] }>(`${ADMIN}/audit?since=1h&limit=1000`),
  ]);
  const usage = new Map<string, Usage>();
  const active = list.tenants.filter((tenant) => tenant.state === 'active');
  await Promise.all(
    active.slice(0, USAGE_TENANTS_MAX).map(async (tenant) => {
      usage.set(tenant.id, await api.get<Usage>(`${ADMIN}/tenants/${seg(tenant.id)}/usage`));
    }),
  );
  return { health, tenants: list.tenants, usage, events: audit.events };
}

/** Requests a minute over the last hour, by outcome. */
function rateSeries(events: readonly AuditEvent[]): {
  times: number[];
  series: Array<{ label: string; color: string; values: number[] }>;
} {
  const minute = 60;
  // Sixty one-minute buckets, the last one the current minute.
  const first = (Math.floor(Date.now() / 1000 / minute) - 59) * minute;
  const times = Array.from({ length: 60 }, (_, index) => first + index * minute);
  const by = { allowed: new Array<number>(60).fill(0), denied: new Array<number>(60).fill(0) };
  const errors = new Array<number>(60).fill(0);
  for (const event of events) {
    const index = Math.floor((Date.parse(event.time) / 1000 - first) / minute);
    if (index < 0 || index > 59) continue;
    const target = event.outcome === 'error' ? errors : by[event.outcome];
    target[index] = (target[index] ?? 0) + 1;
  }
  return {
    times,
    series: [
      { label: 'allowed', color: '#2563eb', values: by.allowed },
      { label: 'denied', color: '#d97706', values: by.denied },
      { label: 'error', color: '#dc2626', values: errors },
    ],
  };
}

export function OverviewPage(props: { context: Context }): JSX.Element {
  const { data, error } = useLoad(() => loadOverview(props.context), [props.context]);
  if (error !== undefined) return <ErrorBox error={error} />;
  if (!data) return <p aria-busy="true">Loading…</p>;
  const usages = [...data.usage.values()];
  const sum = (pick: (usage: Usage) => number): number =>
    usages.reduce((total, usage) => total + pick(usage), 0);
  const rate = rateSeries(data.events);
  const active = data.tenants.filter((tenant) => tenant.state === 'active').length;
  return (
    <>
      <h1>Overview</h1>
      <div class="stats">
        <Stat
          label="Health"
          value={data.health === 'ok' ? 'Healthy' : data.health}
          note="admin listener and engine"
        />
        <Stat
          label="Tenants"
          value={String(data.tenants.length)}
          note={`${String(active)} active`}
        />
        <Stat label="Objects" value={String(sum((usage) => usage.objects))} />
        <Stat label="Logical bytes" value={formatBytes(sum((usage) => usage.logicalBytes))} />
        <Stat label="Stored bytes" value={formatBytes(sum((usage) => usage.physicalBytes))} />
      </div>
      <LiveMetrics />
      <Section title="Requests a minute, last hour (from the audit log)">
        <TimeChart title="Requests a minute by outcome" times={rate.times} series={rate.series} />
      </Section>
      <Section title="Tenants">
        <table>
          <thead>
            <tr>
              <th scope="col">Tenant</th>
              <th scope="col">State</th>
              <th scope="col" class="num">
                Objects
              </th>
              <th scope="col" class="num">
                Logical
              </th>
              <th scope="col" class="num">
                Stored
              </th>
            </tr>
          </thead>
          <tbody>
            {data.tenants.map((tenant) => {
              const usage = data.usage.get(tenant.id);
              return (
                <tr key={tenant.id}>
                  <td>
                    <a href={`#/tenants/${seg(tenant.id)}`}>{tenant.name}</a>
                  </td>
                  <td>
                    <StateBadge state={tenant.state} />
                  </td>
                  <td class="num">{usage ? String(usage.objects) : '—'}</td>
                  <td class="num">{formatBytes(usage?.logicalBytes)}</td>
                  <td class="num">{formatBytes(usage?.physicalBytes)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </Section>
      <Section title="Recent audit events" actions={<a href="#/audit">All events</a>}>
        <AuditTable events={data.events.slice(0, 8)} />
      </Section>
    </>
  );
}
