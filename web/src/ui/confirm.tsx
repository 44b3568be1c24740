import { useMutation } from '@tanstack/react-query';
import { useEffect, useId, useRef, useState, type FormEvent, type ReactNode } from 'react';
import { reasonOf } from '../lib/errors';

/**
 * A button that opens a modal dialog asking to confirm an action (with the action's own fields
 * in `children`); Confirm runs `run`, keeps the dialog open with the reason when it fails, and
 * closes it when it succeeds. Escape or Cancel leave everything as it was.
 */
export function ConfirmButton({
  label,
  title,
  confirmLabel = label,
  dismissLabel = 'Cancel',
  danger = false,
  disabled = false,
  small = true,
  children,
  run,
  onDone,
}: {
  label: string;
  title: string;
  confirmLabel?: string;
  /** The button that closes the dialog and does nothing; name it otherwise where the action is itself a cancel. */
  dismissLabel?: string;
  danger?: boolean;
  disabled?: boolean;
  /** The opening button in the small size (lists, headers); false: a page's main action. */
  small?: boolean;
  children?: ReactNode;
  run: () => Promise<unknown>;
  onDone?: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [open, setOpen] = useState(false);
  const id = useId();
  const action = useMutation({ mutationFn: run, onSuccess: () => (setOpen(false), onDone?.()) });
  useEffect(() => {
    const el = dialog.current;
    if (!el) return;
    if (open && !el.open) el.showModal();
    if (!open && el.open) el.close();
  }, [open]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    action.mutate();
  };
  return (
    <>
      <button
        type="button"
        className={[danger ? 'danger' : small ? null : 'primary', small ? 'button-small' : null].filter(Boolean).join(' ')}
        disabled={disabled}
        onClick={() => {
          action.reset();
          setOpen(true);
        }}
      >
        {label}
      </button>
      <dialog ref={dialog} className="dialog" aria-labelledby={`${id}-title`} onClose={() => setOpen(false)}>
        {open ? (
          <form onSubmit={submit}>
            <h2 id={`${id}-title`}>{title}</h2>
            {children}
            {action.isError ? (
              <p className="tx tx-failed" role="alert">
                {reasonOf(action.error)}
              </p>
            ) : null}
            {action.isPending ? (
              <p className="tx tx-wallet" role="status">
                <span className="spinner" aria-hidden="true" /> Working…
              </p>
            ) : null}
            <div className="dialog-actions">
              <button type="submit" className={danger ? 'danger' : 'primary'} disabled={action.isPending}>
                {confirmLabel}
              </button>
              <button type="button" onClick={() => setOpen(false)} disabled={action.isPending}>
                {dismissLabel}
              </button>
            </div>
          </form>
        ) : null}
      </dialog>
    </>
  );
}
