// The buckets of a tenant with their settings, and the bucket policy editor: the policy is JSON
// edited in place, validated by the server (a dry run, the same parser the engine uses) before
// it is saved; "Remove policy" removes it. Policies are explicit denials by access key.

import type { JSX } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { CONSOLE, allows, seg, type Bucket, type BucketPolicy, type Tenant } from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Section, formatTime, useAction, useLoad } from './ui.js';

const EXAMPLE: BucketPolicy = {
  version: 1,
  statements: [{ effect: 'Deny', actions: ['delete'], principals: ['*'], prefix: 'archive/' }],
};

function PolicyEditor(props: {
  context: Context;
  path: string;
  policy: BucketPolicy | null;
  editable: boolean;
  onSaved: () => void;
}): JSX.Element {
  const [text, setText] = useState(JSON.stringify(props.policy ?? EXAMPLE, null, 2));
  const [status, setStatus] = useState('');
  const action = useAction();
  const id = useRef(`policy-${props.path}`).current;
  const send = (dryRun: boolean, remove = false): void => {
    setStatus('');
    void action.run(async () => {
      let policy: unknown = null;
      if (!remove) {
        try {
          policy = JSON.parse(text);
        } catch (error) {
          throw new TypeError(`The policy is not JSON: ${(error as Error).message}`);
        }
      }
      await props.context.api.call('PUT', props.path + (dryRun ? '?dryRun=true' : ''), {
        policy,
      });
      setStatus(dryRun ? 'Valid: nothing saved yet.' : remove ? 'Policy removed.' : 'Saved.');
      if (!dryRun) props.onSaved();
    });
  };
  if (!props.editable)
    return props.policy ? (
      <pre class="json">{JSON.stringify(props.policy, null, 2)}</pre>
    ) : (
      <p class="muted">No policy.</p>
    );
  return (
    <div class="policy-editor">
      <label for={id}>
        Policy (JSON:{' '}
        <code>{'{version: 1, statements: [{effect: "Deny", actions, principals, prefix?}]}'}</code>)
      </label>
      <textarea
        id={id}
        rows={Math.min(18, Math.max(6, text.split('\n').length + 1))}
        spellcheck={false}
        value={text}
        onInput={(event) => {
          setText(event.currentTarget.value);
          setStatus('');
        }}
      />
      <div class="buttons">
        <button type="button" disabled={action.busy} onClick={() => send(true)}>
          Validate
        </button>
        <button type="button" class="primary" disabled={action.busy} onClick={() => send(false)}>
          Save policy
        </button>
        {props.policy && (
          <button
            type="button"
            class="danger-outline"
            disabled={action.busy}
            onClick={() => send(false, true)}
          >
            Remove policy
          </button>
        )}
        <span class="ok" role="status">
          {status}
        </span>
      </div>
      <ErrorBox error={action.error} />
    </div>
  );
}

function BucketDetail(props: {
  context: Context;
  tenant: Tenant;
  bucket: Bucket;
  onSaved: () => void;
}): JSX.Element {
  const { bucket, context, tenant } = props;
  const path = `${CONSOLE}/tenants/${seg(tenant.id)}/buckets/${seg(bucket.name)}/policy`;
  return (
    <div class="bucket-detail">
      <dl class="facts">
        <dt>Versioning</dt>
        <dd>{bucket.versioning}</dd>
        <dt>Object lock</dt>
        <dd>{bucket.objectLock ? 'enabled' : 'off'}</dd>
        <dt>CORS rules</dt>
        <dd>
          {bucket.cors.length === 0 ? (
            'none'
          ) : (
            <pre class="json">{JSON.stringify(bucket.cors, null, 2)}</pre>
          )}
        </dd>
        <dt>Notifications</dt>
        <dd>
          {bucket.notifications.length === 0
            ? 'none'
            : bucket.notifications.map((config) => (
                <div key={config.id}>
                  <code>{config.id}</code> → {config.url} ({config.events.join(', ')}
                  {config.prefix !== undefined ? `, prefix ${config.prefix}` : ''})
                </div>
              ))}
        </dd>
      </dl>
      <h3>Bucket policy</h3>
      <PolicyEditor
        context={context}
        path={path}
        policy={bucket.policy}
        editable={allows(context.session, 'operator') && tenant.state === 'active'}
        onSaved={props.onSaved}
      />
    </div>
  );
}

export function BucketsTab(props: { context: Context; tenant: Tenant }): JSX.Element {
  const { context, tenant } = props;
  const { data, error, reload } = useLoad(
    () => context.api.get<{ buckets: Bucket[] }>(`${CONSOLE}/tenants/${seg(tenant.id)}/buckets`),
    [context, tenant.id],
  );
  const [open, setOpen] = useState<string | undefined>(undefined);
  return (
    <Section title="Buckets">
      <ErrorBox error={error} />
      {data && data.buckets.length === 0 && (
        <p class="muted">No buckets. Buckets are created on the data plane.</p>
      )}
      {data && data.buckets.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Bucket</th>
              <th scope="col">Versioning</th>
              <th scope="col">Object lock</th>
              <th scope="col">CORS</th>
              <th scope="col">Notifications</th>
              <th scope="col">Policy</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {data.buckets.map((bucket) => (
              <tr key={bucket.name}>
                <td>
                  <button
                    type="button"
                    class="link"
                    aria-expanded={open === bucket.name}
                    onClick={() => setOpen(open === bucket.name ? undefined : bucket.name)}
                  >
                    {bucket.name}
                  </button>
                </td>
                <td>{bucket.versioning}</td>
                <td>{bucket.objectLock ? 'on' : 'off'}</td>
                <td>{String(bucket.cors.length)}</td>
                <td>{String(bucket.notifications.length)}</td>
                <td>
                  {bucket.policy ? `${String(bucket.policy.statements.length)} statements` : '—'}
                </td>
                <td>{formatTime(bucket.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data &&
        data.buckets
          .filter((bucket) => bucket.name === open)
          .map((bucket) => (
            <section key={bucket.name} aria-label={`Bucket ${bucket.name}`}>
              <h3>Bucket {bucket.name}</h3>
              <BucketDetail context={context} tenant={tenant} bucket={bucket} onSaved={reload} />
            </section>
          ))}
    </Section>
  );
}
