// A change shown before it is made: the first button runs the operation as a dry run and shows
// its plan (or the problem that would stop it); only then does the confirm button apply it.

import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Plan } from './api.js';
import { ErrorBox, PlanView, useAction } from './ui.js';

export function PlannedAction(props: {
  /** The verb on the buttons: "Disable tenant". */
  label: string;
  danger?: boolean;
  /** Fields the operation needs (reason, confirmation), rendered above the buttons. */
  children?: ComponentChildren;
  ready?: boolean;
  run: (dryRun: boolean) => Promise<unknown>;
  /** More of the plan than its counts (the operation's own view of `plan.result`). */
  detail?: (plan: Plan) => JSX.Element | null;
  onDone: (result: unknown) => void;
  onCancel?: () => void;
}): JSX.Element {
  const [plan, setPlan] = useState<Plan | undefined>(undefined);
  const action = useAction();
  const confirm = useRef<HTMLButtonElement>(null);
  // A keyboard user lands on the confirm button once the plan is there to read above it.
  // (The button is disabled while the preview is still busy, and cannot take the focus then.)
  useEffect(() => {
    if (plan && !action.busy) confirm.current?.focus();
  }, [plan, action.busy]);
  const preview = (event: Event): void => {
    event.preventDefault();
    void action.run(async () => {
      setPlan(undefined);
      setPlan((await props.run(true)) as Plan);
    });
  };
  const apply = (): void => {
    void action.run(async () => {
      const result = await props.run(false);
      setPlan(undefined);
      props.onDone(result);
    });
  };
  return (
    <form class="planned" onSubmit={preview} aria-label={props.label}>
      <div onInput={() => setPlan(undefined)}>{props.children}</div>
      {plan && <PlanView plan={plan} />}
      {plan && props.detail?.(plan)}
      <ErrorBox error={action.error} />
      <div class="buttons">
        {!plan && (
          <button type="submit" disabled={action.busy || props.ready === false}>
            Preview: {props.label.toLowerCase()}
          </button>
        )}
        {plan && (
          <button
            ref={confirm}
            type="button"
            class={props.danger ? 'danger' : 'primary'}
            disabled={action.busy}
            onClick={apply}
          >
            Confirm: {props.label.toLowerCase()}
          </button>
        )}
        {props.onCancel && (
          <button type="button" class="link" onClick={props.onCancel}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}
