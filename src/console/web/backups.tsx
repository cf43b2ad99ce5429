// Backups: the backups of the whole store and of single tenants with their progress (polled
// while one runs), and for an owner token without a tenant scope a form to start one (previewed
// as a dry run first), over an earlier backup as its base when wanted. A tenant's backup is
// restored into a tenant of the running store from here (planned first, then watched); a
// whole-store backup is restored offline, and the page shows the command. S3 targets (other
// endpoints a backup is also uploaded to) are listed, added (the secret sent once, kept nowhere
// in the page) and removed here. A tenant-scoped token
// has no access to backups.

import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { CONSOLE, allows, type BackupJob, type BackupTarget, type RestoreJob } from './api.js';
import type { Context } from './main.js';
import {
  ErrorBox,
  Field,
  Section,
  Select,
  StateBadge,
  formatBytes,
  formatTime,
  useLoad,
} from './ui.js';
import { PlannedAction } from './planned.js';

const POLL_MS = 1_000;

function StartBackup(props: {
  context: Context;
  targets: readonly BackupTarget[];
  onDone: (name: string) => void;
}) {
  const [name, setName] = useState('');
  const [base, setBase] = useState('');
  const [tenant, setTenant] = useState('');
  const [target, setTarget] = useState('');
  const [reason, setReason] = useState('');
  const body = (): Record<string, string> => ({
    name: name.trim(),
    ...(base.trim() === '' ? {} : { base: base.trim() }),
    ...(tenant.trim() === '' ? {} : { tenantId: tenant.trim() }),
    ...(target === '' ? {} : { target }),
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
        label="Tenant (optional)"
        value={tenant}
        onInput={setTenant}
        hint="back up this tenant's objects only; empty: the whole store"
      />
      <Field
        label="Base backup (optional)"
        value={base}
        onInput={setBase}
        hint="a complete backup of the same kind: what it holds unchanged is linked, not copied"
      />
      {props.targets.length > 0 && (
        <Select
          label="Also upload to"
          value={target}
          options={[
            ['', 'no S3 endpoint: backup.directory only'],
            ...props.targets.map(
              (entry) => [entry.name, `${entry.name} (${entry.endpoint}/${entry.bucket})`] as const,
            ),
          ]}
          onChange={setTarget}
        />
      )}
      <Field label="Reason (optional)" value={reason} onInput={setReason} />
    </PlannedAction>
  );
}

function AddTarget(props: { context: Context; onDone: (name: string) => void }) {
  const [fields, setFields] = useState({
    name: '',
    endpoint: '',
    region: '',
    bucket: '',
    prefix: '',
    accessKeyId: '',
    secretAccessKey: '',
  });
  const set = (field: keyof typeof fields) => (value: string) =>
    setFields((current) => ({ ...current, [field]: value }));
  const body = (): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const [field, value] of Object.entries(fields))
      if (field === 'secretAccessKey' ? value !== '' : value.trim() !== '')
        out[field] = field === 'secretAccessKey' ? value : value.trim();
    return out;
  };
  const ready = ['name', 'endpoint', 'bucket', 'accessKeyId', 'secretAccessKey'].every(
    (field) => fields[field as keyof typeof fields] !== '',
  );
  return (
    <PlannedAction
      label="Add target"
      ready={ready}
      run={(dryRun) =>
        props.context.api.call(
          'POST',
          `${CONSOLE}/backup-targets${dryRun ? '?dryRun=true' : ''}`,
          body(),
        )
      }
      onDone={() => {
        const { name } = fields;
        // The secret is sent once and kept nowhere in the page.
        setFields({ ...fields, name: '', secretAccessKey: '' });
        props.onDone(name.trim());
      }}
    >
      <Field label="Target name" value={fields.name} onInput={set('name')} />
      <Field
        label="Endpoint"
        value={fields.endpoint}
        onInput={set('endpoint')}
        placeholder="https://s3.example.com"
        hint="the S3 endpoint's origin: no path"
      />
      <Field label="Region (optional)" value={fields.region} onInput={set('region')} />
      <Field label="Bucket" value={fields.bucket} onInput={set('bucket')} />
      <Field
        label="Prefix (optional)"
        value={fields.prefix}
        onInput={set('prefix')}
        hint="put before every key, ending in '/': lightwell/"
      />
      <Field label="Access key id" value={fields.accessKeyId} onInput={set('accessKeyId')} />
      <Field
        label="Secret access key"
        type="password"
        value={fields.secretAccessKey}
        onInput={set('secretAccessKey')}
        hint="stored sealed under the master key; never shown again"
      />
    </PlannedAction>
  );
}

function RemoveTarget(props: {
  context: Context;
  targets: readonly BackupTarget[];
  onDone: (name: string) => void;
}) {
  const [name, setName] = useState('');
  const chosen = name === '' ? props.targets[0]?.name : name;
  if (chosen === undefined) return null;
  return (
    <PlannedAction
      label="Remove target"
      danger
      run={(dryRun) =>
        props.context.api.call(
          'DELETE',
          `${CONSOLE}/backup-targets/${encodeURIComponent(chosen)}${dryRun ? '?dryRun=true' : ''}`,
        )
      }
      onDone={() => props.onDone(chosen)}
    >
      <Select
        label="Target"
        value={chosen}
        options={props.targets.map((entry) => [entry.name, entry.name] as const)}
        onChange={setName}
      />
    </PlannedAction>
  );
}

function TargetsSection(props: {
  context: Context;
  owner: boolean;
  targets: readonly BackupTarget[];
  onChange: (text: string) => void;
}): JSX.Element {
  return (
    <Section title="S3 targets">
      <p>
        A backup may also be uploaded to another S3 endpoint (each request's SHA-256 signed, large
        files in 16 MiB parts, what the base already sent copied there). A tenant's backup whose
        directory is gone is fetched back from its target to be restored.
      </p>
      {props.targets.length > 0 && (
        <table aria-label="S3 targets">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Endpoint</th>
              <th scope="col">Bucket and prefix</th>
              <th scope="col">Access key id</th>
            </tr>
          </thead>
          <tbody>
            {props.targets.map((entry) => (
              <tr key={entry.name}>
                <td>{entry.name}</td>
                <td>{`${entry.endpoint} (${entry.region})`}</td>
                <td>{`${entry.bucket}/${entry.prefix}`}</td>
                <td>{entry.accessKeyId}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {props.owner && (
        <AddTarget context={props.context} onDone={(n) => props.onChange(`Target ${n} added.`)} />
      )}
      {props.owner && (
        <RemoveTarget
          context={props.context}
          targets={props.targets}
          onDone={(n) => props.onChange(`Target ${n} removed.`)}
        />
      )}
    </Section>
  );
}

function RestoreBackup(props: {
  context: Context;
  backups: readonly BackupJob[];
  onDone: (text: string) => void;
}) {
  const choices = props.backups.filter((job) => job.tenant !== null && job.state === 'complete');
  const [backup, setBackup] = useState('');
  const [tenant, setTenant] = useState('');
  const [reason, setReason] = useState('');
  const chosen = backup === '' ? choices[0]?.name : backup;
  if (chosen === undefined) return <p>No complete tenant backup to restore yet.</p>;
  const body = (): Record<string, string> => ({
    tenantId: tenant.trim(),
    ...(reason.trim() === '' ? {} : { reason: reason.trim() }),
  });
  return (
    <PlannedAction
      label="Restore backup"
      ready={tenant.trim() !== ''}
      run={(dryRun) =>
        props.context.api.call(
          'POST',
          `${CONSOLE}/backups/${encodeURIComponent(chosen)}/restore${dryRun ? '?dryRun=true' : ''}`,
          body(),
        )
      }
      onDone={() => props.onDone(`Restore of ${chosen} into ${tenant.trim()} queued.`)}
    >
      <Select
        label="Tenant backup"
        value={chosen}
        options={choices.map((job) => [job.name, `${job.name} (tenant ${job.tenant ?? ''})`])}
        onChange={setBackup}
      />
      <Field
        label="Into tenant"
        value={tenant}
        onInput={setTenant}
        hint="an active tenant: the one backed up, or another (create it on the Tenants page)"
      />
      <Field label="Reason (optional)" value={reason} onInput={setReason} />
    </PlannedAction>
  );
}

function RestoresTable(props: { restores: readonly RestoreJob[] }): JSX.Element {
  return (
    <table aria-label="Restores">
      <thead>
        <tr>
          <th scope="col">Backup</th>
          <th scope="col">Into tenant</th>
          <th scope="col">State</th>
          <th scope="col">Progress</th>
          <th scope="col" class="num">
            Objects written (in place)
          </th>
          <th scope="col" class="num">
            Buckets made
          </th>
          <th scope="col">Finished</th>
        </tr>
      </thead>
      <tbody>
        {props.restores.map((job) => (
          <tr key={job.id}>
            <td>{job.backup}</td>
            <td>{job.tenantId}</td>
            <td>
              <StateBadge state={job.state} />
              {job.error !== null && <span> {job.error}</span>}
            </td>
            <td>
              <progress
                max={1}
                value={
                  job.objectsTotal === 0
                    ? Number(job.state === 'complete')
                    : (job.objectsDone + job.objectsSkipped) / job.objectsTotal
                }
                aria-label={`Progress of the restore of ${job.backup}`}
              />
            </td>
            <td class="num">{`${String(job.objectsDone)} of ${String(job.objectsTotal)} (${String(job.objectsSkipped)})`}</td>
            <td class="num">{String(job.bucketsCreated)}</td>
            <td>{formatTime(job.finishedAt ?? undefined)}</td>
          </tr>
        ))}
      </tbody>
    </table>
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
  const restoreList = useLoad(
    () => context.api.get<{ restores: RestoreJob[] }>(`${CONSOLE}/restores`),
    [context],
  );
  const targetList = useLoad(
    () => context.api.get<{ targets: BackupTarget[] }>(`${CONSOLE}/backup-targets`),
    [context],
  );
  const [done, setDone] = useState<string | undefined>(undefined);
  const backups = list.data?.backups ?? [];
  const targets = targetList.data?.targets ?? [];
  const restores = restoreList.data?.restores ?? [];
  const busy = (job: { state: string }) => job.state === 'queued' || job.state === 'running';
  const active = backups.some(busy) || restores.some(busy);
  const { reload } = list;
  const reloadRestores = restoreList.reload;
  useEffect(() => {
    if (!active) return undefined;
    const timer = setInterval(() => {
      reload();
      reloadRestores();
    }, POLL_MS);
    return () => clearInterval(timer);
  }, [active, reload, reloadRestores]);
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
            keep it as safe as the key file. A tenant's backup holds that tenant's objects (their
            current versions, in clear, with their checksums) as of one moment, and no key.
          </p>
          <StartBackup
            context={context}
            targets={targets}
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
                <th scope="col">Of</th>
                <th scope="col">State</th>
                <th scope="col">Progress</th>
                <th scope="col">Snapshot</th>
                <th scope="col" class="num">
                  Segments or objects (linked)
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
                    {job.tenant ?? 'whole store'}
                    {job.target !== null &&
                      `, to ${job.target}` +
                        (job.upload === null
                          ? ''
                          : ` (${String(job.upload.files)} files sent, ` +
                            `${String(job.upload.copied)} copied there)`)}
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
      <ErrorBox error={targetList.error} />
      <TargetsSection
        context={context}
        owner={owner}
        targets={targets}
        onChange={(text) => {
          setDone(text);
          targetList.reload();
        }}
      />
      <Section title="Restore a tenant">
        <p>
          A tenant's backup is restored into a tenant of the running store: the one backed up, or
          another. Buckets it lacks are made (a bucket name another tenant holds stops it), and each
          object is written again and checked against the backup's SHA-256; objects already in place
          are left as they are, so a restore cut short is simply run again.
        </p>
        <ErrorBox error={restoreList.error} />
        {owner && (
          <RestoreBackup
            context={context}
            backups={backups}
            onDone={(text) => {
              setDone(text);
              reloadRestores();
            }}
          />
        )}
        {restores.length > 0 && <RestoresTable restores={restores} />}
      </Section>
      <Section title="Restore the whole store">
        <p>
          A backup of the whole store is restored offline, into an empty data directory, and then
          served from it. Each file is checked against the manifest first; a damaged backup restores
          nothing.
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
