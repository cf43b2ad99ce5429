// Scheduled scrubs on a tenant's Scrub tab: the tenant's own schedule and, for a token without a
// tenant scope, the schedule of every tenant; each with its interval, next run and last run's
// findings (the engine runs them in the background). An operator sets, changes, runs now or
// removes a schedule; a viewer only reads.

import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { CONSOLE, allows, seg, type ScrubSchedule, type Tenant } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, formatBytes, formatTime, useAction, useLoad } from './ui.js';

const POLL_MS = 1000;

function LastRun(props: { schedule: ScrubSchedule }): JSX.Element {
  const run = props.schedule.lastRun;
  if (run === null) return <p class="muted">Not run yet.</p>;
  return (
    <>
      <p>
        Last run {formatTime(run.finishedAt)}: <span class="badge">{run.state}</span>{' '}
        {`${String(run.chunksVerified)} chunks (${formatBytes(run.bytesVerified)}) verified, `}
        <strong>{`${String(run.corruptChunks)} corrupt`}</strong>
        {run.error !== undefined && ` (${run.error})`}
      </p>
      {run.corrupt.length > 0 && (
        <table aria-label={`Findings of the scheduled scrub of ${props.schedule.target}`}>
          <thead>
            <tr>
              <th scope="col">Tenant</th>
              <th scope="col">Bucket</th>
              <th scope="col">Object</th>
              <th scope="col">Version</th>
              <th scope="col">Problem</th>
            </tr>
          </thead>
          <tbody>
            {run.corrupt.map((entry) => (
              <tr key={`${entry.tenantId}/${entry.bucket}/${entry.key}/${entry.versionId}`}>
                <td>{entry.tenantId}</td>
                <td>{entry.bucket}</td>
                <td>
                  <code>{entry.key}</code>
                </td>
                <td>
                  <code>{entry.versionId}</code>
                </td>
                <td>
                  <span class="badge badge-error">{entry.problem}</span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function ScheduleForm(props: {
  context: Context;
  target: string;
  schedule: ScrubSchedule | undefined;
  onSaved: () => void;
}): JSX.Element {
  const { context, target, schedule } = props;
  const [hours, setHours] = useState(String(schedule?.intervalHours ?? 24));
  const action = useAction();
  const label = target === '*' ? 'every tenant' : target;
  const put = (intervalHours: number | null, runNow: boolean): void =>
    void action.run(async () => {
      await context.api.call('PUT', `${CONSOLE}/scrub-schedules/${seg(target)}`, {
        intervalHours,
        ...(runNow ? { runNow } : {}),
      });
      props.onSaved();
    });
  const parsed = Number(hours);
  return (
    <form
      class="inline-form"
      aria-label={`Schedule of ${label}`}
      onSubmit={(event) => {
        event.preventDefault();
        put(parsed, false);
      }}
    >
      <Field
        label={`Interval in hours (${label})`}
        value={hours}
        onInput={setHours}
        hint="1 to 8784"
      />
      <div class="buttons">
        <button type="submit" class="primary" disabled={action.busy}>
          Save schedule of {label}
        </button>
        <button type="button" disabled={action.busy} onClick={() => put(parsed, true)}>
          Save and run {label} now
        </button>
        {schedule && (
          <button
            type="button"
            class="danger-outline"
            disabled={action.busy}
            onClick={() => put(null, false)}
          >
            Remove schedule of {label}
          </button>
        )}
      </div>
      <ErrorBox error={action.error} />
    </form>
  );
}

function ScheduleCard(props: {
  context: Context;
  target: string;
  title: string;
  schedule: ScrubSchedule | undefined;
  onSaved: () => void;
}): JSX.Element {
  const { schedule } = props;
  const operator =
    allows(props.context.session, 'operator') &&
    (props.target !== '*' || props.context.session.tenant === null);
  return (
    <Section title={props.title}>
      {schedule ? (
        <p>
          Every {String(schedule.intervalHours)} h; next run {formatTime(schedule.nextRunAt)}.
        </p>
      ) : (
        <p class="muted">No schedule.</p>
      )}
      {schedule && <LastRun schedule={schedule} />}
      {operator && (
        <ScheduleForm
          key={`${props.target}-${String(schedule?.updatedAt)}`}
          context={props.context}
          target={props.target}
          schedule={schedule}
          onSaved={props.onSaved}
        />
      )}
    </Section>
  );
}

export function ScrubSchedules(props: { context: Context; tenant: Tenant }): JSX.Element {
  const { context, tenant } = props;
  const load = useLoad(
    () => context.api.get<{ schedules: ScrubSchedule[] }>(`${CONSOLE}/scrub-schedules`),
    [context],
  );
  const schedules = load.data?.schedules ?? [];
  // While a schedule is due the engine is running it: look again until its run is written.
  const due = schedules.some((schedule) => Date.parse(schedule.nextRunAt) <= Date.now());
  const { reload } = load;
  useEffect(() => {
    if (!due) return undefined;
    const timer = setInterval(reload, POLL_MS);
    return () => clearInterval(timer);
  }, [due, reload]);
  const own = schedules.find((schedule) => schedule.target === tenant.id);
  const global = schedules.find((schedule) => schedule.target === '*');
  return (
    <>
      <ErrorBox error={load.error} />
      <ScheduleCard
        context={context}
        target={tenant.id}
        title={`Scheduled scrub of ${tenant.id}`}
        schedule={own}
        onSaved={load.reload}
      />
      {(global !== undefined || context.session.tenant === null) && (
        <ScheduleCard
          context={context}
          target="*"
          title="Scheduled scrub of every tenant"
          schedule={global}
          onSaved={load.reload}
        />
      )}
    </>
  );
}
