import type { ReactNode } from 'react';
import { reasonOf, requestIdOf } from '../lib/errors';

/** A wait the reader can see and a screen reader hears once. */
export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p className="loading" role="status">
      <span className="spinner" aria-hidden="true" />
      {label}
    </p>
  );
}

/** Nothing to show yet, and what to do about it. */
export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <p className="empty-title">{title}</p>
      {children ? <div className="empty-body">{children}</div> : null}
    </div>
  );
}

/** A failed load: the reason, what to do, and the request id to quote when it persists. */
export function ErrorState({ error, title = 'Something went wrong', retry }: { error: unknown; title?: string; retry?: () => void }) {
  const requestId = requestIdOf(error);
  return (
    <div className="error-state" role="alert">
      <p className="error-title">{title}</p>
      <p>{reasonOf(error)}</p>
      {requestId ? (
        <p className="muted">
          If this keeps happening, contact support and quote the request id <code>{requestId}</code>.
        </p>
      ) : (
        <p className="muted">Check your connection, then try again.</p>
      )}
      {retry ? (
        <button type="button" onClick={retry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}
