// The re-encryption of one tenant's chunks after a data-key rotation: its progress (polled while
// it runs), what it rewrote, the chunks no key opened, and for an operator of the tenant the
// controls to pause, resume or start another pass. Shown on the Encryption keys page.

import type { JSX } from 'preact';
import { useEffect } from 'preact/hooks';
import { CONSOLE, allows, seg, type Reencryption } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, StateBadge, formatBytes, formatTime, useAction, useLoad } from './ui.js';

const POLL_MS = 2_000;

/** The share of the pass done, 0 to 1; 1 once it is settling or complete. */
function progressOf(job: Reencryption): number {
  if (job.state === 'settling' || job.state === 'complete') return 1;
  if (job.chunksTotal === null || job.chunksTotal === 0) return 0;
  return Math.min(1, job.chunksScanned / job.chunksTotal);
}

const EXPLAIN: Readonly<Record<string, string>> = {
  none: 'No re-encryption has run: the tenant has no retired key, or was rotated before there was one.',
  running: 'Chunks under a retired key are being rewritten under the current key.',
  paused: 'Paused: reads and writes go on; chunks under a retired key stay readable with it.',
  settling:
    'Every chunk was looked at; waiting for uploads that began before the rotation, then the retired keys go.',
  complete: 'Done.',
};

export function ReencryptionPanel(props: { context: Context; tenantId: string }): JSX.Element {
  const { context, tenantId } = props;
  const path = `${CONSOLE}/tenants/${seg(tenantId)}/data-key/reencryption`;
  const job = useLoad(() => context.api.get<Reencryption>(path), [context, path]);
  const action = useAction();
  const { reload } = job;
  const data = job.data;
  const active = data?.state === 'running' || data?.state === 'settling';
  useEffect(() => {
    if (!active) return undefined;
    const timer = setInterval(reload, POLL_MS);
    return () => clearInterval(timer);
  }, [active, reload]);
  const operator = allows(context.session, 'operator');
  const set = (paused: boolean): Promise<void> =>
    action.run(async () => {
      await context.api.call('PUT', path, { paused });
      reload();
    });
  const progress = data ? progressOf(data) : 0;
  return (
    <section class="panel" aria-label={`Re-encryption of ${tenantId}`}>
      <h3>Re-encryption of {tenantId}</h3>
      <ErrorBox error={job.error} />
      {data && (
        <>
          <p>
            <StateBadge state={data.state} /> {EXPLAIN[data.state] ?? ''}
          </p>
          <p>
            <progress
              max={1}
              value={progress}
              aria-label={`Re-encryption progress of ${tenantId}`}
            />{' '}
            {`${String(Math.floor(progress * 100))}%`}
          </p>
          <dl class="facts">
            <dt>Key generation</dt>
            <dd>{String(data.keyGeneration)}</dd>
            <dt>Retired keys kept</dt>
            <dd>{String(data.retiredKeys)}</dd>
            <dt>Chunks looked at</dt>
            <dd>
              {String(data.chunksScanned)}
              {data.chunksTotal === null ? '' : ` of ${String(data.chunksTotal)}`}
            </dd>
            <dt>Chunks rewritten</dt>
            <dd>{`${String(data.chunksRewritten)} (${formatBytes(data.bytesRewritten)})`}</dd>
            <dt>Started</dt>
            <dd>{formatTime(data.startedAt ?? undefined)}</dd>
            <dt>Finished</dt>
            <dd>{formatTime(data.finishedAt ?? undefined)}</dd>
            {data.keysDropped !== null && (
              <>
                <dt>Retired keys dropped</dt>
                <dd>{String(data.keysDropped)}</dd>
              </>
            )}
          </dl>
          {data.chunksUnreadable > 0 && (
            <div class="error" role="alert">
              <p>
                {`${String(data.chunksUnreadable)} chunks could not be read with any key; the ` +
                  'retired keys are kept. Scrub the tenant, repair, then start another pass.'}
              </p>
              <ul>
                {data.unreadable.map((chunk) => (
                  <li key={chunk.chunkId}>
                    <code>{chunk.chunkId}</code>: {chunk.problem}
                  </li>
                ))}
              </ul>
            </div>
          )}
          {operator && (
            <p class="actions">
              {data.state === 'running' && (
                <button type="button" disabled={action.busy} onClick={() => void set(true)}>
                  Pause re-encryption
                </button>
              )}
              {data.state === 'paused' && (
                <button type="button" disabled={action.busy} onClick={() => void set(false)}>
                  Resume re-encryption
                </button>
              )}
              {(data.state === 'none' || data.state === 'complete') && data.retiredKeys > 0 && (
                <button type="button" disabled={action.busy} onClick={() => void set(false)}>
                  Start re-encryption
                </button>
              )}
            </p>
          )}
          <ErrorBox error={action.error} />
        </>
      )}
    </section>
  );
}
