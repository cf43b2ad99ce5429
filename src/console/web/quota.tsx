// A tenant's quota and usage. Usage refreshes every few seconds while the page is open, so an
// operator can watch writes arrive against the limits.

import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ADMIN, allows, seg, type Quota, type Tenant, type Usage } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, Stat, formatBytes, useAction, useLoad } from './ui.js';

const REFRESH_MS = 3000;
const UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

/** "10 GiB", "500mb", "1024": bytes; empty: no limit; otherwise a message for the form. */
export function parseSize(text: string): number | null | string {
  const trimmed = text.trim();
  if (trimmed === '') return null;
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(trimmed);
  const unit = UNITS[(match?.[2] ?? 'x').toLowerCase()];
  if (!match || unit === undefined) return `"${trimmed}" is not a size such as 10 GiB`;
  return Math.round(Number(match[1]) * unit);
}

function Meter(props: { label: string; used: number; max: number | undefined; bytes: boolean }) {
  const show = (value: number): string => (props.bytes ? formatBytes(value) : String(value));
  const share = props.max === undefined || props.max === 0 ? 0 : props.used / props.max;
  return (
    <div class="meter-row">
      <div class="meter-label">
        {props.label}: <strong>{show(props.used)}</strong>
        {props.max === undefined ? ' (no limit)' : ` of ${show(props.max)}`}
      </div>
      <progress
        max={1}
        value={Math.min(1, share)}
        class={share >= 1 ? 'full' : share >= 0.8 ? 'high' : ''}
        aria-label={`${props.label} used`}
      />
    </div>
  );
}

function QuotaForm(props: { context: Context; base: string; quota: Quota; onDone: () => void }) {
  const { quota } = props;
  const [maxBytes, setMaxBytes] = useState(
    quota.maxBytes === undefined ? '' : String(quota.maxBytes),
  );
  const [maxObjects, setMaxObjects] = useState(
    quota.maxObjects === undefined ? '' : String(quota.maxObjects),
  );
  const action = useAction();
  const save = (event: Event): void => {
    event.preventDefault();
    void action.run(async () => {
      const bytes = parseSize(maxBytes);
      const objects = parseSize(maxObjects);
      if (typeof bytes === 'string') throw new TypeError(`Max bytes: ${bytes}`);
      if (typeof objects === 'string') throw new TypeError(`Max objects: ${objects}`);
      await props.context.api.call('PUT', `${props.base}/quota`, {
        maxBytes: bytes,
        maxObjects: objects,
      });
      props.onDone();
    });
  };
  const clear = (): void => {
    void action.run(async () => {
      await props.context.api.call('DELETE', `${props.base}/quota`);
      setMaxBytes('');
      setMaxObjects('');
      props.onDone();
    });
  };
  return (
    <form class="inline-form" onSubmit={save} aria-label="Set the quota">
      <Field
        label="Max bytes"
        value={maxBytes}
        onInput={setMaxBytes}
        placeholder="no limit"
        hint="bytes, or 500 MiB, 10 GiB…"
      />
      <Field
        label="Max objects"
        value={maxObjects}
        onInput={setMaxObjects}
        placeholder="no limit"
      />
      <button type="submit" class="primary" disabled={action.busy}>
        Save quota
      </button>
      <button type="button" disabled={action.busy} onClick={clear}>
        Remove limits
      </button>
      <ErrorBox error={action.error} />
    </form>
  );
}

export function QuotaTab(props: { context: Context; tenant: Tenant }): JSX.Element {
  const { context, tenant } = props;
  const base = `${ADMIN}/tenants/${seg(tenant.id)}`;
  const loaded = useLoad(
    () =>
      Promise.all([
        context.api.get<Quota>(`${base}/quota`),
        context.api.get<Usage>(`${base}/usage`),
      ]),
    [context, base],
  );
  const { reload } = loaded;
  useEffect(() => {
    const timer = setInterval(reload, REFRESH_MS);
    return () => clearInterval(timer);
  }, [reload]);
  if (!loaded.data) return <ErrorBox error={loaded.error} />;
  const [quota, usage] = loaded.data;
  return (
    <>
      <Section title="Quota">
        <ErrorBox error={loaded.error} />
        <Meter label="Bytes" used={quota.usedBytes} max={quota.maxBytes} bytes />
        <Meter label="Objects" used={quota.usedObjects} max={quota.maxObjects} bytes={false} />
        {allows(context.session, 'operator') && tenant.state === 'active' && (
          <QuotaForm
            key={`${String(quota.maxBytes)}/${String(quota.maxObjects)}`}
            context={context}
            base={base}
            quota={quota}
            onDone={reload}
          />
        )}
      </Section>
      <Section title="Usage">
        <div class="stats">
          <Stat label="Objects" value={String(usage.objects)} />
          <Stat label="Versions" value={String(usage.versions)} />
          <Stat label="Delete markers" value={String(usage.deleteMarkers)} />
          <Stat label="Logical bytes" value={formatBytes(usage.logicalBytes)} />
          <Stat label="Stored bytes" value={formatBytes(usage.physicalBytes)} />
        </div>
        {usage.buckets.length > 0 && (
          <table>
            <thead>
              <tr>
                <th scope="col">Bucket</th>
                <th scope="col" class="num">
                  Objects
                </th>
                <th scope="col" class="num">
                  Versions
                </th>
                <th scope="col" class="num">
                  Delete markers
                </th>
                <th scope="col" class="num">
                  Logical bytes
                </th>
              </tr>
            </thead>
            <tbody>
              {usage.buckets.map((bucket) => (
                <tr key={bucket.name}>
                  <td>{bucket.name}</td>
                  <td class="num">{String(bucket.objects)}</td>
                  <td class="num">{String(bucket.versions)}</td>
                  <td class="num">{String(bucket.deleteMarkers)}</td>
                  <td class="num">{formatBytes(bucket.logicalBytes)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <p class="muted">Refreshes every {String(REFRESH_MS / 1000)} s.</p>
      </Section>
    </>
  );
}
