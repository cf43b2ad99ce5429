// Service accounts and access keys of a tenant. A key's secret appears once, in the panel shown
// right after it is created or rotated; dismissing the panel drops it from the page, and no list
// can show it again (the API never returns it twice).

import type { JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ADMIN, allows, seg, type AccessKey, type Account, type Tenant } from './api.js';
import type { Context } from './main.js';
import {
  ErrorBox,
  Field,
  Section,
  Select,
  StateBadge,
  formatTime,
  useAction,
  useLoad,
} from './ui.js';
import { PlannedAction } from './planned.js';

function SecretPanel(props: { keyAnswer: AccessKey; onDismiss: () => void }): JSX.Element {
  const { keyAnswer } = props;
  const [copied, setCopied] = useState(false);
  const panel = useRef<HTMLDivElement>(null);
  useEffect(() => panel.current?.focus(), []);
  return (
    <div class="secret" role="alert" aria-label="New secret key" tabIndex={-1} ref={panel}>
      <h3>Store this secret now: it will not be shown again</h3>
      <dl class="facts">
        <dt>Access key id</dt>
        <dd>
          <code data-testid="access-key-id">{keyAnswer.accessKeyId}</code>
        </dd>
        <dt>Secret key</dt>
        <dd>
          <code data-testid="secret-key">{keyAnswer.secretKey}</code>
        </dd>
      </dl>
      <div class="buttons">
        {/* The clipboard needs a secure context (HTTPS, or loopback). */}
        {isSecureContext && (
          <button
            type="button"
            onClick={() =>
              void navigator.clipboard
                .writeText(keyAnswer.secretKey ?? '')
                .then(() => setCopied(true))
            }
          >
            {copied ? 'Copied' : 'Copy secret'}
          </button>
        )}
        <button type="button" class="primary" onClick={props.onDismiss}>
          I have stored it
        </button>
      </div>
    </div>
  );
}

function CreateAccount(props: { context: Context; base: string; onDone: () => void }) {
  const [id, setId] = useState('');
  const [name, setName] = useState('');
  const action = useAction();
  const submit = (event: Event): void => {
    event.preventDefault();
    void action.run(async () => {
      const body: Record<string, string> = { id: id.trim() };
      if (name.trim() !== '') body['name'] = name.trim();
      await props.context.api.call('POST', `${props.base}/accounts`, body);
      setId('');
      setName('');
      props.onDone();
    });
  };
  return (
    <form class="inline-form" onSubmit={submit} aria-label="Create an account">
      <Field
        label="Account id"
        value={id}
        onInput={setId}
        required
        hint="letters, digits, . _ @ -"
      />
      <Field label="Name (optional)" value={name} onInput={setName} />
      <button type="submit" disabled={action.busy || id.trim() === ''}>
        Create account
      </button>
      <ErrorBox error={action.error} />
    </form>
  );
}

function CreateKey(props: {
  context: Context;
  base: string;
  accounts: readonly Account[];
  onCreated: (key: AccessKey) => void;
}) {
  const [accountId, setAccountId] = useState(props.accounts[0]?.id ?? '');
  const [scopes, setScopes] = useState('read,write');
  const [expiresAt, setExpiresAt] = useState('');
  const [externalRef, setExternalRef] = useState('');
  const action = useAction();
  const account = accountId === '' ? (props.accounts[0]?.id ?? '') : accountId;
  const submit = (event: Event): void => {
    event.preventDefault();
    void action.run(async () => {
      const body: Record<string, string> = { accountId: account, scopes: scopes.trim() };
      if (expiresAt.trim() !== '') body['expiresAt'] = expiresAt.trim();
      if (externalRef.trim() !== '') body['externalRef'] = externalRef.trim();
      props.onCreated(await props.context.api.call<AccessKey>('POST', `${props.base}/keys`, body));
    });
  };
  if (props.accounts.length === 0)
    return <p class="muted">Create an account first: every key belongs to one.</p>;
  return (
    <form class="inline-form" onSubmit={submit} aria-label="Create an access key">
      <Select
        label="Account"
        value={account}
        options={props.accounts.map((item) => [item.id, item.name ?? item.id] as const)}
        onChange={setAccountId}
      />
      <Field
        label="Scopes"
        value={scopes}
        onInput={setScopes}
        hint="read,write,delete,admin or op=read:bucket=logs:prefix=2026/"
      />
      <Field
        label="Expires (optional)"
        value={expiresAt}
        onInput={setExpiresAt}
        placeholder="2027-12-31"
      />
      <Field label="External reference (optional)" value={externalRef} onInput={setExternalRef} />
      <button type="submit" class="primary" disabled={action.busy || scopes.trim() === ''}>
        Create key
      </button>
      <ErrorBox error={action.error} />
    </form>
  );
}

/** The rotate or revoke step of one key, previewed before the confirm. */
function KeyChange(props: {
  context: Context;
  base: string;
  keyId: string;
  kind: 'rotate' | 'revoke';
  onDone: (result: AccessKey) => void;
  onCancel: () => void;
}) {
  const [reason, setReason] = useState('');
  const path = `${props.base}/keys/${seg(props.keyId)}/${props.kind}`;
  return (
    <PlannedAction
      label={props.kind === 'rotate' ? 'Rotate key' : 'Revoke key'}
      danger={props.kind === 'revoke'}
      ready={props.kind === 'rotate' || reason.trim() !== ''}
      run={(dryRun) => {
        const body = reason.trim() === '' ? {} : { reason: reason.trim() };
        return props.context.api.call('POST', path + (dryRun ? '?dryRun=true' : ''), body);
      }}
      onDone={(result) => props.onDone(result as AccessKey)}
      onCancel={props.onCancel}
    >
      <Field
        label={props.kind === 'revoke' ? 'Reason (for the audit log)' : 'Reason (optional)'}
        value={reason}
        onInput={setReason}
        required={props.kind === 'revoke'}
      />
    </PlannedAction>
  );
}

export function KeysTab(props: { context: Context; tenant: Tenant }): JSX.Element {
  const { context, tenant } = props;
  const base = `${ADMIN}/tenants/${seg(tenant.id)}`;
  const accounts = useLoad(
    () => context.api.get<{ accounts: Account[] }>(`${base}/accounts`),
    [context, base],
  );
  const keys = useLoad(
    () => context.api.get<{ keys: AccessKey[] }>(`${base}/keys`),
    [context, base],
  );
  const [secret, setSecret] = useState<AccessKey | undefined>(undefined);
  const [change, setChange] = useState<{ keyId: string; kind: 'rotate' | 'revoke' } | undefined>();
  const operator = allows(context.session, 'operator') && tenant.state === 'active';
  const done = (result: AccessKey): void => {
    setChange(undefined);
    if (result.secretKey !== undefined) setSecret(result);
    keys.reload();
  };
  return (
    <>
      {secret && <SecretPanel keyAnswer={secret} onDismiss={() => setSecret(undefined)} />}
      <Section title="Service accounts">
        <ErrorBox error={accounts.error} />
        {accounts.data && accounts.data.accounts.length === 0 && (
          <p class="muted">No accounts yet.</p>
        )}
        {accounts.data && accounts.data.accounts.length > 0 && (
          <table>
            <thead>
              <tr>
                <th scope="col">Account</th>
                <th scope="col">Name</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {accounts.data.accounts.map((account) => (
                <tr key={account.id}>
                  <td>
                    <code>{account.id}</code>
                  </td>
                  <td>{account.name ?? ''}</td>
                  <td>{formatTime(account.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {operator && <CreateAccount context={context} base={base} onDone={accounts.reload} />}
      </Section>
      <Section title="Access keys">
        <ErrorBox error={keys.error} />
        {keys.data && keys.data.keys.length === 0 && <p class="muted">No keys yet.</p>}
        {keys.data && keys.data.keys.length > 0 && (
          <table>
            <thead>
              <tr>
                <th scope="col">Access key id</th>
                <th scope="col">Account</th>
                <th scope="col">Scopes</th>
                <th scope="col">State</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                {operator && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {keys.data.keys.map((key) => (
                <tr key={key.accessKeyId}>
                  <td>
                    <code>{key.accessKeyId}</code>
                  </td>
                  <td>{key.accountId}</td>
                  <td>
                    <code class="scopes">{key.scopes}</code>
                  </td>
                  <td>
                    <StateBadge state={key.state} />
                  </td>
                  <td>{formatTime(key.rotatedAt ?? key.createdAt)}</td>
                  <td>{formatTime(key.expiresAt)}</td>
                  {operator && (
                    <td>
                      {key.state !== 'revoked' && (
                        <div class="actions">
                          <button
                            type="button"
                            onClick={() => setChange({ keyId: key.accessKeyId, kind: 'rotate' })}
                            aria-label={`Rotate ${key.accessKeyId}`}
                          >
                            Rotate
                          </button>
                          <button
                            type="button"
                            class="danger-outline"
                            onClick={() => setChange({ keyId: key.accessKeyId, kind: 'revoke' })}
                            aria-label={`Revoke ${key.accessKeyId}`}
                          >
                            Revoke
                          </button>
                        </div>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {change && (
          <div class="subpanel">
            <h3>
              {change.kind === 'rotate' ? 'Rotate' : 'Revoke'} <code>{change.keyId}</code>
            </h3>
            <KeyChange
              key={`${change.kind}-${change.keyId}`}
              context={context}
              base={base}
              keyId={change.keyId}
              kind={change.kind}
              onDone={done}
              onCancel={() => setChange(undefined)}
            />
          </div>
        )}
        {operator && accounts.data && (
          <>
            <h3>New access key</h3>
            <CreateKey
              context={context}
              base={base}
              accounts={accounts.data.accounts}
              onCreated={done}
            />
          </>
        )}
      </Section>
    </>
  );
}
