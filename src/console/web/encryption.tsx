// Encryption keys: the master key's fingerprint and each tenant's data-key generation, with the
// two rotations (each previewed as a dry run first), and the background re-encryption that
// follows a data-key rotation (reencryption.tsx). Rotating the master key is for an owner
// token without a tenant scope; rotating a tenant's data key for an operator of that tenant. A
// viewer sees the state and no control.

import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { CONSOLE, allows, seg, type KeyState, type MasterKeyRotation } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, StateBadge, formatTime, useLoad } from './ui.js';
import { PlannedAction } from './planned.js';
import { ReencryptionPanel } from './reencryption.js';

function RotateMasterKey(props: { context: Context; onDone: (done: string) => void }) {
  const [reason, setReason] = useState('');
  return (
    <PlannedAction
      label="Rotate master key"
      danger
      run={(dryRun) =>
        props.context.api.call(
          'POST',
          `${CONSOLE}/master-key/rotate${dryRun ? '?dryRun=true' : ''}`,
          reason.trim() === '' ? {} : { reason: reason.trim() },
        )
      }
      onDone={(result) => {
        const done = result as MasterKeyRotation;
        props.onDone(
          `Master key rotated: ${done.previousFingerprint} → ${done.fingerprint}; ` +
            `${String(done.counts.tenantKeys)} tenant keys and ` +
            `${String(done.counts.accessKeys)} access-key secrets re-sealed.`,
        );
      }}
    >
      <Field label="Reason (optional)" value={reason} onInput={setReason} />
    </PlannedAction>
  );
}

function RotateDataKey(props: {
  context: Context;
  tenantId: string;
  onDone: (done: string) => void;
  onCancel: () => void;
}) {
  return (
    <PlannedAction
      label={`Rotate data key of ${props.tenantId}`}
      run={(dryRun) =>
        props.context.api.call(
          'POST',
          `${CONSOLE}/tenants/${seg(props.tenantId)}/data-key/rotate${dryRun ? '?dryRun=true' : ''}`,
          {},
        )
      }
      onDone={(result) => {
        const done = result as { keyGeneration: number };
        props.onDone(
          `Tenant ${props.tenantId} now writes under key ${String(done.keyGeneration)}.`,
        );
      }}
      onCancel={props.onCancel}
    />
  );
}

export function EncryptionPage(props: { context: Context }): JSX.Element {
  const { context } = props;
  const state = useLoad(() => context.api.get<KeyState>(`${CONSOLE}/keys`), [context]);
  const [done, setDone] = useState<string | undefined>(undefined);
  const [rotating, setRotating] = useState<string | undefined>(undefined);
  const [watching, setWatching] = useState<string | undefined>(undefined);
  const { session } = context;
  const owner = allows(session, 'owner') && session.tenant === null;
  const operator = allows(session, 'operator');
  const finished = (message: string): void => {
    setDone(message);
    if (rotating !== undefined) setWatching(rotating);
    setRotating(undefined);
    state.reload();
  };
  const data = state.data;
  return (
    <>
      <h1>Encryption keys</h1>
      {done !== undefined && (
        <p class="ok" role="status">
          {done}
        </p>
      )}
      <ErrorBox error={state.error} />
      <Section title="Master key">
        <p>
          The master key seals every tenant's data key and every stored secret. Rotating it makes a
          new key, re-seals all of them in one commit and destroys the old key. Bearer tokens,
          signed URLs and listing tokens made before the rotation stop working; access keys keep
          their secrets. Keep a copy of the new key file: a backup of the old one no longer opens
          this store.
        </p>
        {data && (
          <dl class="facts">
            <dt>Fingerprint</dt>
            <dd>
              <code aria-label="Master key fingerprint">{data.masterKey.fingerprint ?? '—'}</code>
            </dd>
            <dt>In force since</dt>
            <dd>{formatTime(data.masterKey.since ?? undefined)}</dd>
          </dl>
        )}
        {owner && <RotateMasterKey context={context} onDone={finished} />}
      </Section>
      <Section title="Tenant data keys">
        <p>
          Each tenant's chunks are encrypted under its own data key. After a rotation new chunks use
          the new key, and the chunks written before are rewritten under it in the background
          (throttled, resumable, paused here if need be); the retired key reads them meanwhile and
          is dropped once no chunk needs it.
        </p>
        {data && (
          <table aria-label="Tenant data keys">
            <thead>
              <tr>
                <th scope="col">Tenant</th>
                <th scope="col">State</th>
                <th scope="col" class="num">
                  Key generation
                </th>
                <th scope="col" class="num">
                  Retired keys
                </th>
                <th scope="col">Last rotated</th>
                <th scope="col">Action</th>
              </tr>
            </thead>
            <tbody>
              {data.tenants.map((tenant) => (
                <tr key={tenant.tenantId}>
                  <td>
                    <a href={`#/tenants/${seg(tenant.tenantId)}`}>{tenant.tenantId}</a>
                  </td>
                  <td>
                    <StateBadge state={tenant.state} />
                  </td>
                  <td class="num">{String(tenant.keyGeneration)}</td>
                  <td class="num">{String(tenant.retiredKeys)}</td>
                  <td>{tenant.rotatedAt === null ? 'never' : formatTime(tenant.rotatedAt)}</td>
                  <td>
                    {operator && (
                      <button type="button" onClick={() => setRotating(tenant.tenantId)}>
                        Rotate…
                      </button>
                    )}{' '}
                    <button
                      type="button"
                      aria-label={`Show the re-encryption of ${tenant.tenantId}`}
                      onClick={() => setWatching(tenant.tenantId)}
                    >
                      Re-encryption
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {operator && rotating !== undefined && (
          <RotateDataKey
            key={rotating}
            context={context}
            tenantId={rotating}
            onDone={finished}
            onCancel={() => setRotating(undefined)}
          />
        )}
        {watching !== undefined && (
          <ReencryptionPanel key={watching} context={context} tenantId={watching} />
        )}
      </Section>
    </>
  );
}
