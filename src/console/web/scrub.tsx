// Scrub of a tenant: the damaged chunks the engine has on record for it (found by a read or a
// scrub) with what the operator can do about them; start a checksum scrub of the whole tenant or
// one bucket (its dry run says what it will read), watch its progress, cancel it, and read the
// objects whose chunks failed.

import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import {
  CONSOLE,
  allows,
  seg,
  type Bucket,
  type CorruptChunk,
  type ScrubJob,
  type Tenant,
} from './api.js';
import type { Context } from './main.js';
import {
  ErrorBox,
  Field,
  Section,
  Select,
  formatBytes,
  formatTime,
  useAction,
  useLoad,
} from './ui.js';
import { PlannedAction } from './planned.js';
import { ScrubSchedules } from './schedule.js';

const POLL_MS = 1000;

function StartScrub(props: { context: Context; tenant: Tenant; onStarted: () => void }) {
  const { context, tenant } = props;
  const buckets = useLoad(
    () => context.api.get<{ buckets: Bucket[] }>(`${CONSOLE}/tenants/${seg(tenant.id)}/buckets`),
    [context, tenant.id],
  );
  const [bucket, setBucket] = useState('');
  const [reason, setReason] = useState('');
  return (
    <PlannedAction
      label="Start scrub"
      run={(dryRun) =>
        context.api.call('POST', `${CONSOLE}/scrubs${dryRun ? '?dryRun=true' : ''}`, {
          tenantId: tenant.id,
          ...(bucket === '' ? {} : { bucket }),
          ...(reason.trim() === '' ? {} : { reason: reason.trim() }),
        })
      }
      onDone={props.onStarted}
    >
      <div class="inline-form">
        <Select
          label="What to scrub"
          value={bucket}
          options={[
            ['', `The whole tenant ${tenant.id}`],
            ...(buckets.data?.buckets ?? []).map(
              (item) => [item.name, `Bucket ${item.name}`] as const,
            ),
          ]}
          onChange={setBucket}
        />
        <Field label="Reason (optional)" value={reason} onInput={setReason} />
      </div>
    </PlannedAction>
  );
}

function stateClass(state: ScrubJob['state']): string {
  if (state === 'complete') return 'active';
  if (state === 'failed') return 'error';
  return state === 'cancelled' ? 'disabled' : 'role';
}

function Findings(props: { job: ScrubJob }): JSX.Element {
  const { job } = props;
  if (job.counts.corruptChunks === 0)
    return (
      <p class="muted">
        {job.state === 'complete'
          ? 'Every chunk verified: nothing corrupt.'
          : 'Nothing corrupt so far.'}
      </p>
    );
  return (
    <table aria-label="Corrupt chunks">
      <thead>
        <tr>
          <th scope="col">Bucket</th>
          <th scope="col">Object</th>
          <th scope="col">Version</th>
          <th scope="col" class="num">
            Chunk
          </th>
          <th scope="col">Problem</th>
        </tr>
      </thead>
      <tbody>
        {job.corrupt.map((entry) => (
          <tr key={`${entry.bucket}/${entry.key}/${entry.versionId}/${String(entry.chunkIndex)}`}>
            <td>{entry.bucket}</td>
            <td>
              <code>{entry.key}</code>
            </td>
            <td>
              <code>{entry.versionId}</code>
            </td>
            <td class="num">{String(entry.chunkIndex)}</td>
            <td>
              <span class="badge badge-error">{entry.problem}</span>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const FOUND_BY: Readonly<Record<CorruptChunk['foundBy'], string>> = {
  read: 'a read (refused: nothing was sent)',
  scrub: 'a scrub',
};

/** The corrupt-chunk records of the tenant, and what to do about them. */
function DamagedChunks(props: { context: Context; tenant: Tenant }): JSX.Element {
  const { context, tenant } = props;
  const records = useLoad(
    () =>
      context.api.get<{ chunks: CorruptChunk[]; truncated: boolean }>(
        `${CONSOLE}/tenants/${seg(tenant.id)}/corrupt-chunks`,
      ),
    [context, tenant.id],
  );
  const chunks = records.data?.chunks ?? [];
  return (
    <Section title="Damaged chunks on record">
      <ErrorBox error={records.error} />
      {records.data && chunks.length === 0 && (
        <p class="muted">No damaged chunk on record for this tenant.</p>
      )}
      {chunks.length > 0 && (
        <>
          <p>
            The engine keeps a record of each chunk a read or a scrub found damaged. A read of an
            object that holds one answers a 500 problem (<code>corrupt_data</code>), never other
            bytes. What to do: run a scrub of the tenant below, whose findings name each object
            (bucket, key and version) that holds the chunk; then restore those objects from a tenant
            backup (Backups page) or have their owner upload them again. In a cluster, the repair (
            <code>POST /admin/api/v1/cluster/repair/rebalance</code>) copies a good replica over the
            damaged one. Check the disk that holds the segment too.
          </p>
          <table aria-label="Damaged chunks on record">
            <thead>
              <tr>
                <th scope="col">Chunk</th>
                <th scope="col">Where</th>
                <th scope="col">Problem</th>
                <th scope="col">Found by</th>
                <th scope="col">First seen</th>
                <th scope="col">Last seen</th>
                <th scope="col" class="num">
                  Times
                </th>
              </tr>
            </thead>
            <tbody>
              {chunks.map((chunk) => (
                <tr key={chunk.chunkId}>
                  <td>
                    <code title={chunk.chunkId}>{chunk.chunkId.slice(0, 16)}…</code>
                  </td>
                  <td class="nowrap">
                    {`segment ${String(chunk.segmentId)} at ${String(chunk.offset)}, ` +
                      formatBytes(chunk.length)}
                  </td>
                  <td>{chunk.reason}</td>
                  <td>{FOUND_BY[chunk.foundBy]}</td>
                  <td class="nowrap">{formatTime(chunk.firstSeenAt)}</td>
                  <td class="nowrap">{formatTime(chunk.lastSeenAt)}</td>
                  <td class="num">{String(chunk.seen)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {records.data?.truncated === true && <p class="muted">The first 1000 are shown.</p>}
        </>
      )}
    </Section>
  );
}

export function ScrubTab(props: { context: Context; tenant: Tenant }): JSX.Element {
  const { context, tenant } = props;
  const jobs = useLoad(
    () => context.api.get<{ jobs: ScrubJob[] }>(`${CONSOLE}/scrubs?tenant=${seg(tenant.id)}`),
    [context, tenant.id],
  );
  const cancel = useAction();
  const [selected, setSelected] = useState<string | undefined>(undefined);
  const list = jobs.data?.jobs ?? [];
  const running = list.some((job) => job.state === 'counting' || job.state === 'running');
  const { reload } = jobs;
  useEffect(() => {
    if (!running) return undefined;
    const timer = setInterval(reload, POLL_MS);
    return () => clearInterval(timer);
  }, [running, reload]);
  const shown = list.find((job) => job.id === selected) ?? list[0];
  const operator = allows(context.session, 'operator');
  return (
    <>
      <DamagedChunks context={context} tenant={tenant} />
      {operator && (
        <Section title="Start a scrub">
          <p>
            A scrub reads every chunk of the tenant (or bucket) back from disk and checks its
            header, its length and its checksums. It changes nothing.
          </p>
          <StartScrub context={context} tenant={tenant} onStarted={reload} />
        </Section>
      )}
      <Section title="Scrubs">
        <ErrorBox error={jobs.error} />
        <ErrorBox error={cancel.error} />
        {list.length === 0 && <p class="muted">No scrubs since the admin process started.</p>}
        {list.length > 0 && (
          <table>
            <thead>
              <tr>
                <th scope="col">Started</th>
                <th scope="col">Scope</th>
                <th scope="col">State</th>
                <th scope="col">Progress</th>
                <th scope="col" class="num">
                  Verified
                </th>
                <th scope="col" class="num">
                  Corrupt chunks
                </th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((job) => (
                <tr key={job.id} aria-selected={job.id === shown?.id}>
                  <td class="nowrap">{formatTime(job.startedAt)}</td>
                  <td>{job.bucket === undefined ? 'whole tenant' : `bucket ${job.bucket}`}</td>
                  <td>
                    <span class={`badge badge-${stateClass(job.state)}`}>{job.state}</span>
                  </td>
                  <td class="nowrap">
                    <progress max={1} value={job.progress} aria-label={`Progress of ${job.id}`} />{' '}
                    {`${String(Math.floor(job.progress * 100))}%`}
                  </td>
                  <td class="num">
                    {`${String(job.counts.chunksVerified)} chunks, ${formatBytes(job.counts.bytesVerified)}`}
                  </td>
                  <td class="num">{String(job.counts.corruptChunks)}</td>
                  <td>
                    <div class="actions">
                      <button
                        type="button"
                        aria-label={`Findings of the scrub started ${formatTime(job.startedAt)}`}
                        onClick={() => setSelected(job.id)}
                      >
                        Findings
                      </button>
                      {operator && (job.state === 'counting' || job.state === 'running') && (
                        <button
                          type="button"
                          class="danger-outline"
                          disabled={cancel.busy}
                          onClick={() =>
                            void cancel.run(async () => {
                              await context.api.call(
                                'POST',
                                `${CONSOLE}/scrubs/${seg(job.id)}/cancel`,
                              );
                              reload();
                            })
                          }
                        >
                          Cancel scrub
                        </button>
                      )}
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      {shown && (
        <Section title={`Findings of the scrub started ${formatTime(shown.startedAt)}`}>
          {shown.error !== undefined && <div class="error">{shown.error}</div>}
          <Findings job={shown} />
        </Section>
      )}
      <ScrubSchedules context={context} tenant={tenant} />
    </>
  );
}
