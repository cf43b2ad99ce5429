// Backups: the whole store's backups with their progress (polled while one runs), and for an
// owner token without a tenant scope a form to start one (previewed as a dry run first), over
// an earlier backup as its base when wanted. A restore is offline: the page shows the command.
// A tenant-scoped token has no access to backups (a backup holds every tenant).

import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { CONSOLE, allows, type BackupJob } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, StateBadge, formatBytes, formatTime, useLoad } from './ui.js';
import { PlannedAction } from './planned.js';

const POLL_MS = 1_000;

function StartBackup(props: { context: Context; onDone: (name: string) => void }) {
  const [name, setName] = useState('');
  const [base, setBase] = useState('');
  const [reason, setReason] = useState('');
  const body = (): Record<string, string> => ({
    name: name.trim(),
    ...(base.trim() === '' ? {} : { base: base.trim() }),
    ...(reason.trim() === '' ? {} : { reason: reason.trim() }),
  });
  return (
    <PlannedAction
      label="Start backup"
      ready={name.trim() !== ''}
      run={(dryRun) =>
        props.context.api.call('POST', `${CONSOLE}/backups${dryRun ? '?dryRun=true' : ''}`, body())
      }
      onDone={() => props.onDone(name.trim())}
    >
      <Field
        label="Backup name"
        value={name}
        onInput={setName}
        hint="a-z, 0-9, '.', '_' and '-': the directory under backup.directory"
      />
      <Field
        label="Base backup (optional)"
        value={base}
        onInput={setBase}
        hint="a complete backup whose sealed segments are linked instead of copied"
      />
      <Field label="Reason (optional)" value={reason} onInput={setReason} />
    </PlannedAction>
  );
}

function progressOf(job: BackupJob): number {
  if (job.state === 'complete') return 1;
  return job.segmentsTotal === 0 ? 0 : job.segmentsDone / job.segmentsTotal;
}

export function BackupsPage(props: { context: Context }): JSX.Element {
  const { context } = props;
  const { session } = context;
  const list = useLoad(
    () => context.api.get<{ backups: BackupJob[] }>(`${CONSOLE}/backups`),
    [context],
  );
  const [done, setDone] = useState<string | undefined>(undefined);
  const backups = list.data?.backups ?? [];
  const active = backups.some((job) => job.state === 'queued' || job.state === 'running');
  const { reload } = list;
  useEffect(() => {
    if (!active) return undefined;
    const timer = setInterval(reload, POLL_MS);
    return () => clearInterval(timer);
  }, [active, reload]);
  const owner = allows(session, 'owner') && session.tenant === null;
  return (
    <>
      <h1>Backups</h1>
      {done !== undefined && (
        <p class="ok" role="status">
          {done}
        </p>
      )}
      <ErrorBox error={list.error} />
      {owner && (
        <Section title="Start a backup">
          <p>
            A backup copies the whole store as of one moment: a snapshot of the index, the master
            key and every segment, each file with its SHA-256 in the manifest. It runs in the
            background while the store serves. It holds the master key, so it opens every object:
            keep it as safe as the key file.
          </p>
          <StartBackup
            context={context}
            onDone={(name) => {
              setDone(`Backup ${name} queued.`);
              reload();
            }}
          />
        </Section>
      )}
      <Section title="Backups">
        {backups.length === 0 && !list.error && <p>No backup yet.</p>}
        {backups.length > 0 && (
          <table aria-label="Backups">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Progress</th>
                <th scope="col">Snapshot</th>
                <th scope="col" class="num">
                  Segments (linked)
                </th>
                <th scope="col" class="num">
                  Copied
                </th>
                <th scope="col">Holds</th>
              </tr>
            </thead>
            <tbody>
              {backups.map((job) => (
                <tr key={job.name}>
                  <td>
                    {job.name}
                    {job.base === null ? '' : ` (over ${job.base})`}
                  </td>
                  <td>
                    <StateBadge state={job.state} />
                    {job.error !== null && <span> {job.error}</span>}
                  </td>
                  <td>
                    <progress
                      max={1}
                      value={progressOf(job)}
                      aria-label={`Progress of backup ${job.name}`}
                    />
                  </td>
                  <td>{formatTime(job.snapshotAt ?? undefined)}</td>
                  <td class="num">{`${String(job.segmentsTotal)} (${String(job.segmentsReused)})`}</td>
                  <td class="num">{formatBytes(job.bytesDone)}</td>
                  <td>
                    {job.counts === null
                      ? '—'
                      : `${String(job.counts.tenants)} tenants, ${String(job.counts.buckets)} ` +
                        `buckets, ${String(job.counts.versions)} versions`}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <Section title="Restore">
        <p>
          A backup is restored offline, into an empty data directory, and then served from it. Each
          file is checked against the manifest first; a damaged backup restores nothing.
        </p>
        <pre>
          <code>
            {'lightwell restore --from BACKUP_DIRECTORY/NAME --data-dir NEW_DIR\n' +
              'lightwell serve --data-dir NEW_DIR'}
          </code>
        </pre>
      </Section>
    </>
  );
}
