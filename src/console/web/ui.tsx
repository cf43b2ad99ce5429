// Small building blocks shared by the console's pages: loading with errors, labelled fields,
// the problem box, the plan of a dry run and the confirm step of a destructive operation.

import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type Plan } from './api.js';

export function formatBytes(bytes: number | undefined): string {
  if (bytes === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? String(value) : value.toFixed(value < 10 ? 2 : 1)} ${units[unit] ?? ''}`;
}

export function formatTime(iso: string | undefined): string {
  if (iso === undefined) return '—';
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** Loads with `load` whenever `deps` change; `reload` runs it again. */
export function useLoad<T>(
  load: () => Promise<T>,
  deps: readonly unknown[],
): { data: T | undefined; error: unknown; reload: () => void } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [round, setRound] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (value) => {
        if (!live) return;
        setData(value);
        setError(undefined);
      },
      (failure: unknown) => {
        if (live) setError(failure);
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, round]);
  const reload = useCallback(() => setRound((value) => value + 1), []);
  return { data, error, reload };
}

/** The problem object of a failed call, in words: message, code, status and request id. */
export function ErrorBox(props: { error: unknown }): JSX.Element | null {
  const { error } = props;
  if (error === undefined || error === null) return null;
  if (error instanceof ApiError) {
    const { problem } = error;
    return (
      <div class="error" role="alert">
        <strong>{problem.message}</strong>
        {problem.blockers && problem.blockers.length > 0 && (
          <ul>
            {problem.blockers.map((blocker) => (
              <li key={`${blocker.code}:${blocker.message}`}>{blocker.message}</li>
            ))}
          </ul>
        )}
        <div class="error-meta">
          {problem.status > 0 ? `HTTP ${String(problem.status)} · ` : ''}
          <code>{problem.code}</code>
          {problem.requestId !== undefined && (
            <>
              {' · request '}
              <code>{problem.requestId}</code>
            </>
          )}
        </div>
      </div>
    );
  }
  return (
    <div class="error" role="alert">
      <strong>{error instanceof Error ? error.message : JSON.stringify(error)}</strong>
    </div>
  );
}

let fieldCounter = 0;

/** A labelled input; the label names the control for keyboard and screen-reader users. */
export function Field(props: {
  label: string;
  value: string;
  onInput: (value: string) => void;
  type?: 'text' | 'password';
  placeholder?: string;
  hint?: string;
  required?: boolean;
  autoFocus?: boolean;
  name?: string;
}): JSX.Element {
  const id = useRef(`field-${String((fieldCounter += 1))}`).current;
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (props.autoFocus) input.current?.focus();
  }, [props.autoFocus]);
  const attributes = {
    ref: input,
    id,
    name: props.name ?? id,
    value: props.value,
    placeholder: props.placeholder,
    required: props.required,
    'aria-describedby': props.hint === undefined ? undefined : `${id}-hint`,
    onInput: (event: Event) => props.onInput((event.currentTarget as HTMLInputElement).value),
  };
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.type === 'password' ? (
        <input type="password" {...attributes} />
      ) : (
        <input type="text" {...attributes} />
      )}
      {props.hint !== undefined && (
        <small id={`${id}-hint`} class="hint">
          {props.hint}
        </small>
      )}
    </div>
  );
}

export function Select(props: {
  label: string;
  value: string;
  options: ReadonlyArray<readonly [string, string]>;
  onChange: (value: string) => void;
}): JSX.Element {
  const id = useRef(`field-${String((fieldCounter += 1))}`).current;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <select
        id={id}
        value={props.value}
        onChange={(event) => props.onChange(event.currentTarget.value)}
      >
        {props.options.map(([value, text]) => (
          <option key={value} value={value}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}

export function Section(props: {
  title: string;
  children: ComponentChildren;
  actions?: ComponentChildren;
}): JSX.Element {
  return (
    <section class="card" aria-label={props.title}>
      <header class="card-head">
        <h2>{props.title}</h2>
        {props.actions}
      </header>
      {props.children}
    </section>
  );
}

export function Stat(props: { label: string; value: string; note?: string }): JSX.Element {
  return (
    <div class="stat">
      <div class="stat-value">{props.value}</div>
      <div class="stat-label">{props.label}</div>
      {props.note !== undefined && <div class="stat-note">{props.note}</div>}
    </div>
  );
}

export function StateBadge(props: { state: string }): JSX.Element {
  return <span class={`badge badge-${props.state}`}>{props.state}</span>;
}

const COUNT_LABELS: Readonly<Record<string, string>> = {
  buckets: 'Buckets',
  bucketsToCreate: 'Buckets to create',
  objects: 'Objects',
  skipped: 'Objects not in the backup (SSE-C)',
  versions: 'Versions',
  deleteMarkers: 'Delete markers',
  legalHeldVersions: 'Versions under legal hold',
  retainedVersions: 'Versions under retention',
  accessKeys: 'Access keys',
  physicalBytes: 'Physical bytes',
  chunkRefs: 'Chunk references',
  logicalBytes: 'Logical bytes',
  policies: 'Policies',
  rules: 'Rules',
  uploads: 'Incomplete uploads',
  retiredKeys: 'Retired data keys',
  sealedBytes: 'Sealed segment bytes',
  segments: 'Segments to copy or link',
  tenants: 'Tenants',
  tenantKeys: 'Tenant data keys to re-seal',
  webhookSecrets: 'Webhook secrets',
};

/** What a dry run says the operation would do. */
export function PlanView(props: { plan: Plan }): JSX.Element {
  const { plan } = props;
  return (
    <div class="plan" aria-label="Dry-run plan">
      <p>
        Plan for <code>{plan.action}</code> on <code>{plan.target}</code> (dry run: nothing has
        changed yet)
      </p>
      <table class="plan-table">
        <tbody>
          {Object.entries(plan.counts ?? {})
            .filter(([, value]) => value !== 0 || plan.action.endsWith('Tenant'))
            .map(([name, value]) => (
              <tr key={name}>
                <th scope="row">{COUNT_LABELS[name] ?? name}</th>
                <td>{name.endsWith('Bytes') ? formatBytes(value) : String(value)}</td>
              </tr>
            ))}
        </tbody>
      </table>
      {plan.blockers.length > 0 && (
        <ul class="blockers">
          {plan.blockers.map((blocker) => (
            <li key={`${blocker.code}:${blocker.message}`}>{blocker.message}</li>
          ))}
        </ul>
      )}
      {plan.warnings && plan.warnings.length > 0 && (
        <ul class="warnings">
          {plan.warnings.map((warning) => (
            <li key={`${warning.code}:${warning.message}`}>{warning.message}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** Runs `action`, keeping its pending state and failure for the form that started it. */
export function useAction(): {
  busy: boolean;
  error: unknown;
  run: (action: () => Promise<void>) => Promise<void>;
  clear: () => void;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = useCallback(async (action: () => Promise<void>) => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(undefined) };
}
