// A tenant's bucket lifecycle rules: pick a bucket, read its rules (the S3 lifecycle
// configuration, however it was written), and for an operator edit them. The draft is the rules'
// JSON, which "Add a rule" fills from a short form (prefix and days, the common case) and which
// can be edited by hand for tags, sizes and dates. Saving is previewed: the dry run validates the
// rules with the S3 API's checks and lists what they would expire or abort now; only then does
// the confirm store them. "Remove all rules" deletes the configuration, also previewed.

import type { JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import {
  CONSOLE,
  allows,
  seg,
  type Bucket,
  type BucketLifecycle,
  type LifecyclePreview,
  type LifecycleRule,
  type Plan,
  type Tenant,
} from './api.js';
import type { Context } from './main.js';
import { ErrorBox, Field, Section, Select, formatBytes, formatTime, useLoad } from './ui.js';
import { PlannedAction } from './planned.js';

const ACTIONS: Readonly<Record<string, string>> = {
  'expire-current': 'expire the current version',
  'expire-noncurrent': 'remove the noncurrent version',
  'remove-marker': 'remove the expired delete marker',
  abort: 'abort the incomplete upload',
};

function daysText(count: number): string {
  return count === 1 ? '1 day' : `${String(count)} days`;
}

function filterText(rule: LifecycleRule): string {
  const filter = rule.filter ?? {};
  const parts: string[] = [];
  if (filter.prefix !== undefined) parts.push(`prefix ${filter.prefix}`);
  for (const tag of filter.tags ?? []) parts.push(`tag ${tag.key}=${tag.value}`);
  if (filter.sizeGreaterThan !== undefined) parts.push(`size > ${String(filter.sizeGreaterThan)}`);
  if (filter.sizeLessThan !== undefined) parts.push(`size < ${String(filter.sizeLessThan)}`);
  return parts.length === 0 ? 'the whole bucket' : parts.join(', ');
}

function actionsText(rule: LifecycleRule): string {
  const parts: string[] = [];
  const { expiration, noncurrentExpiration: noncurrent } = rule;
  if (expiration?.days !== undefined) parts.push(`expire after ${daysText(expiration.days)}`);
  if (expiration?.date !== undefined) parts.push(`expire on ${expiration.date}`);
  if (expiration?.expiredObjectDeleteMarker === true) parts.push('remove lone delete markers');
  if (noncurrent)
    parts.push(
      `noncurrent versions after ${daysText(noncurrent.noncurrentDays)}` +
        (noncurrent.newerNoncurrentVersions === undefined
          ? ''
          : `, keeping the ${String(noncurrent.newerNoncurrentVersions)} newest`),
    );
  if (rule.abortIncompleteMultipartUpload)
    parts.push(
      `abort uploads after ${daysText(rule.abortIncompleteMultipartUpload.daysAfterInitiation)}`,
    );
  return parts.join('; ');
}

function RulesTable(props: { rules: LifecycleRule[] }): JSX.Element {
  if (props.rules.length === 0) return <p class="muted">No lifecycle rules: nothing expires.</p>;
  return (
    <table aria-label="Lifecycle rules">
      <thead>
        <tr>
          <th scope="col">Rule</th>
          <th scope="col">Status</th>
          <th scope="col">Applies to</th>
          <th scope="col">Actions</th>
        </tr>
      </thead>
      <tbody>
        {props.rules.map((rule) => (
          <tr key={rule.id}>
            <td>
              <code>{rule.id}</code>
            </td>
            <td>{rule.status}</td>
            <td>{filterText(rule)}</td>
            <td>{actionsText(rule)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The dry run's list: what the proposed rules would act on now. */
function PreviewList(props: { plan: Plan }): JSX.Element | null {
  const preview = (props.plan.result as { preview?: LifecyclePreview } | undefined)?.preview;
  if (!preview) return null;
  return (
    <div class="lifecycle-preview">
      <h4>What these rules would act on now</h4>
      {preview.due.length === 0 ? (
        <p class="muted">Nothing is due now.</p>
      ) : (
        <table aria-label="Due now">
          <thead>
            <tr>
              <th scope="col">Object</th>
              <th scope="col">Version or upload</th>
              <th scope="col">Action</th>
              <th scope="col">Rule</th>
              <th scope="col">Due since</th>
              <th scope="col">Size</th>
            </tr>
          </thead>
          <tbody>
            {preview.due.map((entry) => (
              <tr key={`${entry.key}\0${entry.versionId ?? entry.uploadId ?? ''}`}>
                <td>{entry.key}</td>
                <td>
                  <code>{entry.versionId ?? entry.uploadId ?? ''}</code>
                </td>
                <td>
                  {ACTIONS[entry.action] ?? entry.action}
                  {entry.locked === true && ' (held by object lock: waits)'}
                </td>
                <td>
                  <code>{entry.ruleId}</code>
                </td>
                <td>{formatTime(entry.dueAt)}</td>
                <td>{entry.size === undefined ? '—' : formatBytes(entry.size)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p class="hint">
        {String(preview.scanned)} versions and uploads read
        {preview.truncated ? ' (the first ones only: the bucket is larger)' : ''}; the list shows at
        most 200.
      </p>
    </div>
  );
}

/** A whole number of days from a form field; undefined when empty. */
function days(text: string): number | undefined {
  return text.trim() === '' ? undefined : Number(text.trim());
}

function AddRule(props: { onAdd: (rule: LifecycleRule) => void }): JSX.Element {
  const [id, setId] = useState('');
  const [prefix, setPrefix] = useState('');
  const [current, setCurrent] = useState('');
  const [noncurrent, setNoncurrent] = useState('');
  const [uploads, setUploads] = useState('');
  const add = (event: Event): void => {
    event.preventDefault();
    const rule: LifecycleRule = {
      ...(id.trim() === '' ? {} : { id: id.trim() }),
      status: 'Enabled',
    };
    if (prefix !== '') rule.filter = { prefix };
    const expire = days(current);
    if (expire !== undefined) rule.expiration = { days: expire };
    const old = days(noncurrent);
    if (old !== undefined) rule.noncurrentExpiration = { noncurrentDays: old };
    const abort = days(uploads);
    if (abort !== undefined) rule.abortIncompleteMultipartUpload = { daysAfterInitiation: abort };
    props.onAdd(rule);
    for (const clear of [setId, setPrefix, setCurrent, setNoncurrent, setUploads]) clear('');
  };
  return (
    <form class="inline-form add-rule" onSubmit={add} aria-label="Add a rule">
      <Field label="Rule id" value={id} onInput={setId} hint="empty: one is made up" />
      <Field label="Key prefix" value={prefix} onInput={setPrefix} hint="empty: every key" />
      <Field label="Expire current versions after (days)" value={current} onInput={setCurrent} />
      <Field
        label="Remove noncurrent versions after (days)"
        value={noncurrent}
        onInput={setNoncurrent}
      />
      <Field label="Abort incomplete uploads after (days)" value={uploads} onInput={setUploads} />
      <button type="submit">Add rule to the draft</button>
    </form>
  );
}

function RulesEditor(props: {
  context: Context;
  path: string;
  saved: BucketLifecycle;
  onSaved: () => void;
}): JSX.Element {
  const { context, path, saved } = props;
  const [text, setText] = useState(JSON.stringify(saved.rules, null, 2));
  const [reason, setReason] = useState('');
  const [done, setDone] = useState('');
  const [parseError, setParseError] = useState<unknown>(undefined);
  useEffect(() => setText(JSON.stringify(saved.rules, null, 2)), [saved]);
  const rules = (): unknown => {
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new TypeError(`The rules are not JSON: ${(error as Error).message}`);
    }
  };
  const send = (body: { rules: unknown }, dryRun: boolean): Promise<unknown> =>
    context.api.call('PUT', path + (dryRun ? '?dryRun=true' : ''), {
      ...body,
      ...(reason.trim() === '' ? {} : { reason: reason.trim() }),
    });
  return (
    <>
      <AddRule
        onAdd={(rule) => {
          setParseError(undefined);
          try {
            const draft = rules();
            setText(
              JSON.stringify(
                [...(Array.isArray(draft) ? (draft as unknown[]) : []), rule],
                null,
                2,
              ),
            );
          } catch (error) {
            setParseError(error);
          }
        }}
      />
      <ErrorBox error={parseError} />
      <PlannedAction
        label="Save lifecycle rules"
        run={(dryRun) => send({ rules: rules() }, dryRun)}
        detail={(plan) => <PreviewList plan={plan} />}
        onDone={() => {
          setDone('Lifecycle rules saved.');
          props.onSaved();
        }}
      >
        <div class="field wide">
          <label for="lifecycle-rules">
            Rules (JSON: a list of{' '}
            <code>
              {'{id?, status, filter?: {prefix?, tags?, sizeGreaterThan?, sizeLessThan?}, ' +
                'expiration?: {days? | date? | expiredObjectDeleteMarker?}, ' +
                'noncurrentExpiration?, abortIncompleteMultipartUpload?}'}
            </code>
            )
          </label>
          <textarea
            id="lifecycle-rules"
            rows={Math.min(20, Math.max(6, text.split('\n').length + 1))}
            spellcheck={false}
            value={text}
            onInput={(event) => {
              setText(event.currentTarget.value);
              setDone('');
            }}
          />
        </div>
        <Field label="Reason (optional)" value={reason} onInput={setReason} />
      </PlannedAction>
      {done !== '' && (
        <p class="ok" role="status">
          {done}
        </p>
      )}
      {saved.rules.length > 0 && (
        <PlannedAction
          label="Remove all rules"
          danger
          run={(dryRun) => send({ rules: null }, dryRun)}
          onDone={() => {
            setDone('Lifecycle rules removed.');
            props.onSaved();
          }}
        />
      )}
    </>
  );
}

export function LifecycleTab(props: { context: Context; tenant: Tenant }): JSX.Element {
  const { context, tenant } = props;
  const buckets = useLoad(
    () => context.api.get<{ buckets: Bucket[] }>(`${CONSOLE}/tenants/${seg(tenant.id)}/buckets`),
    [context, tenant.id],
  );
  const [chosen, setChosen] = useState<string | undefined>(undefined);
  const names = buckets.data?.buckets.map((bucket) => bucket.name) ?? [];
  const bucket = chosen ?? names[0];
  const path =
    bucket === undefined
      ? undefined
      : `${CONSOLE}/tenants/${seg(tenant.id)}/buckets/${seg(bucket)}/lifecycle`;
  const lifecycle = useLoad(
    () =>
      path === undefined ? Promise.resolve(undefined) : context.api.get<BucketLifecycle>(path),
    [context, path],
  );
  const operator = allows(context.session, 'operator') && tenant.state === 'active';
  return (
    <>
      <ErrorBox error={buckets.error} />
      {buckets.data && names.length === 0 && (
        <p class="muted">No buckets. Buckets are created on the data plane.</p>
      )}
      {bucket !== undefined && (
        <Section title={`Lifecycle rules of ${bucket}`}>
          <Select
            label="Bucket"
            value={bucket}
            options={names.map((name) => [name, name] as const)}
            onChange={setChosen}
          />
          <ErrorBox error={lifecycle.error} />
          {lifecycle.data && <RulesTable rules={lifecycle.data.rules} />}
          {lifecycle.data?.reindexing === true && (
            <p class="hint">The bucket is being reindexed for its newest rules.</p>
          )}
          <p class="hint">
            The same rules as the S3 API's bucket lifecycle configuration; the engine applies them
            in the background. Object lock always wins over a rule.
          </p>
        </Section>
      )}
      {operator && path !== undefined && lifecycle.data && (
        <Section title="Edit the rules">
          <RulesEditor
            context={context}
            path={path}
            saved={lifecycle.data}
            onSaved={lifecycle.reload}
          />
        </Section>
      )}
    </>
  );
}
