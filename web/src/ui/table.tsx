import { useState, type ReactNode } from 'react';

export interface Column<T> {
  header: string;
  cell: (row: T) => ReactNode;
  className?: string;
}

/**
 * A data table with a caption for its accessible name; scrolls sideways on a phone instead of
 * squeezing, and its scroller takes keyboard focus so the arrow keys reach what is off screen.
 */
export function Table<T>({ caption, columns, rows, rowKey }: { caption: string; columns: Column<T>[]; rows: T[]; rowKey: (row: T) => string }) {
  return (
    <div className="table-wrap" tabIndex={0} role="region" aria-label={caption}>
      <table>
        <caption className="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column.header} scope="col" className={column.className}>
                {column.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((column) => (
                <td key={column.header} className={column.className} data-label={column.header}>
                  {column.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * Cursor paging: `cursor` is the current page's (undefined for the first); the cursors of the
 * pages before it are kept so "Previous page" goes back without the API paging backwards.
 */
export function useCursorPages() {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  return {
    cursor: cursors[cursors.length - 1],
    reset: () => setCursors([undefined]),
    hasPrevious: cursors.length > 1,
    previous: () => setCursors((c) => (c.length > 1 ? c.slice(0, -1) : c)),
    next: (nextCursor: string) => setCursors((c) => [...c, nextCursor]),
  };
}

/** "Previous page" / "Next page" over a cursor-paged list. */
export function Pager({ pages, nextCursor, busy }: { pages: ReturnType<typeof useCursorPages>; nextCursor: string | null; busy?: boolean }) {
  return (
    <nav className="pager" aria-label="Pages">
      <button type="button" onClick={pages.previous} disabled={!pages.hasPrevious || busy}>
        Previous page
      </button>
      <button type="button" onClick={() => nextCursor !== null && pages.next(nextCursor)} disabled={nextCursor === null || busy}>
        Next page
      </button>
    </nav>
  );
}
