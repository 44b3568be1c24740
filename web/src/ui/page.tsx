import { useEffect, type ReactNode } from 'react';

/** A page's heading (the document title follows it) and its content. */
export function Page({ title, heading, actions, children }: { title: string; heading?: ReactNode; actions?: ReactNode; children: ReactNode }) {
  useEffect(() => {
    document.title = `${title} · gpufarm`;
  }, [title]);
  return (
    <>
      <div className="page-head">
        <h1>{heading ?? title}</h1>
        {actions ? <div className="page-actions">{actions}</div> : null}
      </div>
      {children}
    </>
  );
}
